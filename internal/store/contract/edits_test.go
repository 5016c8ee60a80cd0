package contract

import (
	"fmt"
	"slices"
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
	said := time.Unix(0, 500) // when message 90 was said
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
		c.SetEdited(90, st, amend, said)
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
	// An Edit with the message's new text stores it at the message's seq,
	// stamped as the message was and carrying the Amend; the old text
	// moves past every seq planned. The conversation's tail holds the new
	// text in its place, and the same edit again no longer holds.
	t.Run("with its new text", func(t *testing.T) {
		c := conv(stamp, memory.Digest{})
		ex := exchange("r1", memory.Digest{}, memory.Digest{3})
		ex.Edits[0].Text = &memory.Message{Role: "user", Content: "m300, rewritten"}
		p := PlanSave(ex, at, time.Time{}, false, c)
		if len(p.Amends) != 1 || !p.Amends[0].Revise || p.Amends[0].MoveTo != 103 || p.Amends[0].Amend != (memory.Digest{3}) {
			t.Fatalf("planned %+v, want seq 90 revised, its old text moved to seq 103", p.Amends)
		}
		if p.Result.Inserted != 2 || p.Result.Stored[0].Seq != 101 || p.Result.Stored[1].Seq != 102 || p.Result.Superseded != 1 {
			t.Fatalf("inserted %d (seqs %d, %d), superseded %d; want the turn and reply at 101, 102, one superseded",
				p.Result.Inserted, p.Result.Stored[0].Seq, p.Result.Stored[1].Seq, p.Result.Superseded)
		}
		want := memory.Key("r1", len(ex.Prior)+len(ex.Turn)+1)
		if r := p.Result.Revised; len(r) != 1 || r[0].Seq != 90 || r[0].Content != "m300, rewritten" || r[0].Key != want ||
			r[0].Conversation != ex.Conversation || !r[0].CreatedAt.Equal(said) {
			t.Fatalf("revised %+v, want the new text at seq 90 keyed %s, said when the old text was", r, want)
		}
		if got := p.Unsaid(); !slices.Equal(got, []int64{103}) {
			t.Fatalf("unsaid %v, want the old text's new seq, 103", got)
		}
		if len(p.RevisedStamps) != 1 || p.RevisedStamps[0] != stamp {
			t.Fatalf("revised stamps %+v, want the edited message's %+v", p.RevisedStamps, stamp)
		}
		if c.LastSeq != 103 {
			t.Fatalf("last seq %d, want 103", c.LastSeq)
		}
		k := slices.IndexFunc(c.Tail, func(m memory.Message) bool { return m.Seq == 90 })
		if k < 0 || c.Tail[k].Content != "m300, rewritten" {
			t.Fatal("the tail does not hold the new text at seq 90")
		}
		if p := PlanSave(exchange("r2", memory.Digest{}, memory.Digest{5}), at, time.Time{}, false, c); len(p.Amends) != 0 {
			t.Fatal("an edit read before the new text was stored holds")
		}
	})
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
