package contract

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPlanSaveRewind: an exchange whose Rewind names a live message as the
// save read it (SetRewound) supersedes that message and every live one
// after it — its tail and those before the tail alike, counted — and
// stores its window after what is kept; one whose message the save found
// gone, or stamped otherwise, or that an earlier exchange of the same
// batch superseded, aligns as any other, superseding nothing.
func TestPlanSaveRewind(t *testing.T) {
	const keep = 4
	msg := func(i int) memory.Message {
		return memory.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprint("m", i)}
	}
	history := make([]memory.Message, memory.BranchHead+keep+10)
	for i := range history {
		history[i] = msg(i)
	}
	stamp := memory.Stamp{Known: true, Pos: 300, Digest: memory.Digest{1}}
	exchange := func(id string) memory.Exchange {
		ex := memory.Exchange{ID: id, Turn: []memory.Message{{Role: "user", Content: "q " + id}},
			Reply: memory.Message{Role: "assistant", Content: "a " + id}, Rewind: &memory.Rewind{Seq: 40, Pos: stamp.Pos, Digest: stamp.Digest}}
		ex.Prior, ex.Skipped = memory.CutHistory(history, keep)
		return ex
	}
	// conv holds 100 live messages, seqs 1..100; its tail, the newest 80,
	// ends with the history's window as a previous turn stored it.
	conv := func(st memory.Stamp, live int) *SaveConv {
		c := &SaveConv{LastSeq: 100}
		for s := 21; s <= 100; s++ {
			m := memory.Message{Role: "user", Content: fmt.Sprint("old ", s), Seq: int64(s)}
			if k := s - (100 - keep + 1); k >= 0 && k < keep {
				m = history[len(history)-keep+k]
				m.Seq = int64(s)
			}
			c.Tail = append(c.Tail, m)
		}
		c.SetRewound(40, st, live)
		return c
	}
	at := time.Unix(1, 0)
	for _, tt := range []struct {
		name   string
		st     memory.Stamp
		rewind bool
	}{
		{"holds", stamp, true},
		{"gone", memory.Stamp{}, false},
		{"moved", memory.Stamp{Known: true, Pos: 301, Digest: stamp.Digest}, false},
		{"other digest", memory.Stamp{Known: true, Pos: 300, Digest: memory.Digest{2}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := conv(tt.st, 61)
			p := PlanSave(exchange("a"), at, time.Time{}, false, c)
			if !tt.rewind {
				if p.SupersedeFrom != 0 || p.Result.Inserted != 2 {
					t.Fatalf("superseded from %d and inserted %d, want an aligned save of 2", p.SupersedeFrom, p.Result.Inserted)
				}
				return
			}
			if p.SupersedeFrom != 40 || p.Result.Superseded != 61 || p.Result.Inserted != keep+2 {
				t.Fatalf("superseded %d from %d and inserted %d, want 61 from 40 and %d", p.Result.Superseded, p.SupersedeFrom, p.Result.Inserted, keep+2)
			}
			if got := slices.IndexFunc(c.Tail, func(m memory.Message) bool { return m.Seq >= 40 && m.Seq <= 100 }); got >= 0 {
				t.Fatal("the tail still holds superseded messages")
			}
			// Its window is stamped at its positions past the gap, only
			// with the gap's digest.
			if p.Stamps[0].Known {
				t.Fatal("the window is stamped without the gap's digest")
			}
			// A second exchange of the batch, carrying the same Rewind (a
			// regeneration of the first's turn), finds the message
			// superseded: it aligns with the first's window, and replaces
			// the first's turn only.
			q := PlanSave(exchange("b"), at, time.Time{}, false, c)
			if q.SupersedeFrom != 101+keep || q.Result.Superseded != 2 || q.Result.Inserted != 2 {
				t.Fatalf("the second exchange superseded %d from %d and inserted %d, want the first's turn and 2",
					q.Result.Superseded, q.SupersedeFrom, q.Result.Inserted)
			}
		})
	}
}
