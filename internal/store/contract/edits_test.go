package contract

import (
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPlanSaveEdits: an exchange's Edit whose message the save read as
// the Capturer did (live, with the same Stamp and Amend: SetEdited) is
// planned as an Amend, superseding that message only when it says so
// (counted, and out of the conversation's tail); one whose message the
// save found gone, stamped otherwise or amended otherwise meanwhile is
// ignored. A later exchange of the batch naming the same message reads
// it as the first left it. A Rewind that holds clears the Amends from its
// position on.
func TestPlanSaveEdits(t *testing.T) {
	const keep = 4
	history := make([]memory.Message, memory.BranchHead+keep+10)
	for i := range history {
		history[i] = memory.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprint("m", i)}
	}
	stamp := memory.Stamp{Known: true, Pos: 300, Digest: memory.Digest{1}}
	exchange := func(id string, was, amend memory.Digest) memory.Exchange {
		ex := memory.Exchange{ID: id, Turn: []memory.Message{{Role: "user", Content: "q " + id}},
			Reply: memory.Message{Role: "assistant", Content: "a " + id},
			Edits: []memory.Edit{{Seq: 90, Pos: stamp.Pos, Digest: stamp.Digest, Was: was, Amend: amend, Supersede: true}}}
		ex.Prior, ex.Skipped = memory.CutHistory(history, keep)
		return ex
	}
	conv := func(st memory.Stamp, amend memory.Digest) *SaveConv {
		c := &SaveConv{LastSeq: 100}
		for s := 21; s <= 100; s++ {
			m := memory.Message{Role: "user", Content: fmt.Sprint("old ", s), Seq: int64(s)}
			if k := s - (100 - keep + 1); k >= 0 && k < keep {
				m = history[len(history)-keep+k]
				m.Seq = int64(s)
			}
			c.Tail = append(c.Tail, m)
		}
		c.SetEdited(90, st, amend)
		return c
	}
	at := time.Unix(1, 0)
	for _, tt := range []struct {
		name  string
		st    memory.Stamp
		amend memory.Digest
		holds bool
	}{
		{"holds", stamp, memory.Digest{}, true},
		{"gone", memory.Stamp{}, memory.Digest{}, false},
		{"other digest", memory.Stamp{Known: true, Pos: 300, Digest: memory.Digest{2}}, memory.Digest{}, false},
		{"amended meanwhile", stamp, memory.Digest{7}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := conv(tt.st, tt.amend)
			if got := c.EditsToRead(exchange("x", memory.Digest{}, memory.Digest{3})); len(got) != 0 {
				t.Fatalf("EditsToRead = %v after SetEdited, want none", got)
			}
			p := PlanSave(exchange("r1", memory.Digest{}, memory.Digest{3}), at, time.Time{}, false, c)
			if got := len(p.Amends) == 1; got != tt.holds {
				t.Fatalf("planned %d amends, want the edit to hold: %v", len(p.Amends), tt.holds)
			}
			wantSup := 0
			if tt.holds {
				wantSup = 1
				if a := p.Amends[0]; a.Seq != 90 || a.Amend != (memory.Digest{3}) || !a.Supersede {
					t.Fatalf("planned %+v", a)
				}
			}
			if p.Result.Superseded != wantSup || p.SupersedeFrom != 0 || p.ClearAmendsFrom != -1 {
				t.Fatalf("superseded %d from seq %d, clearing amends from %d; want %d, none, none",
					p.Result.Superseded, p.SupersedeFrom, p.ClearAmendsFrom, wantSup)
			}
			if got := p.Result.Inserted; got != 2 {
				t.Fatalf("inserted %d, want the turn and reply", got)
			}
			// The same edit again (another exchange of the batch, checked
			// before this one was saved) no longer holds.
			if p := PlanSave(exchange("r2", memory.Digest{}, memory.Digest{3}), at, time.Time{}, false, c); len(p.Amends) != 0 {
				t.Fatal("an edit planned twice")
			}
		})
	}
	t.Run("rewind clears", func(t *testing.T) {
		c := conv(stamp, memory.Digest{})
		c.SetRewound(40, memory.Stamp{Known: true, Pos: 280, Digest: memory.Digest{9}}, 61)
		ex := exchange("r", memory.Digest{}, memory.Digest{3})
		ex.Edits, ex.Rewind = nil, &memory.Rewind{Seq: 40, Pos: 280, Digest: memory.Digest{9}}
		if p := PlanSave(ex, at, time.Time{}, false, c); p.ClearAmendsFrom != 280 || p.SupersedeFrom != 40 {
			t.Fatalf("a rewind clears amends from %d, supersedes from seq %d; want 280 and 40", p.ClearAmendsFrom, p.SupersedeFrom)
		}
	})
}
