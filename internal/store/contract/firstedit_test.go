package contract

import (
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestFirstMessageEditSupersedesFromStart: a named conversation's client
// that resends its history with the first message changed (the rest as
// stored, or cut after it) edits the chat from its first message: the save
// supersedes every live message and stores the history as the new branch.
// A derived conversation's save, one that compared only the newest part
// of a longer conversation, and one whose history shares not even the
// second message with the stored branch (another chat under the same
// name, a client that summarised its first messages) supersede nothing.
func TestFirstMessageEditSupersedesFromStart(t *testing.T) {
	msg := func(role, text string) memory.Message { return memory.Message{Role: role, Content: text} }
	stored := func(n int) []memory.Message {
		var out []memory.Message
		for i := range n {
			m := msg([]string{"user", "assistant"}[i%2], fmt.Sprint("message ", i))
			m.Seq = int64(i + 1)
			out = append(out, m)
		}
		return out
	}
	edited := func(n int) []memory.Message {
		prior := stored(n)
		for i := range prior {
			prior[i].Seq = 0
		}
		prior[0] = msg("user", "message 0, edited")
		return prior
	}
	at := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name      string
		conv      int // live messages stored
		prior     []memory.Message
		derived   bool
		wantFrom  int64
		wantPrior int
	}{
		{"rest resent", 6, edited(6), false, 1, 6},
		{"rest cut but one", 6, edited(2), false, 1, 2},
		{"derived", 6, edited(6), true, 0, 6},
		{"beyond the compared tail", 2*AlignSlack + 6, edited(6), false, 0, 6},
		{"first messages summarised", 6, []memory.Message{msg("user", "summary of messages 0 to 2"), msg("assistant", "message 3"), msg("user", "message 4"), msg("assistant", "message 5")}, false, 0, 4},
		{"another chat under the name", 6, []memory.Message{msg("user", "another chat"), msg("assistant", "its reply")}, false, 0, 2},
		{"continuation", 6, append(stored(6)[:6:6], msg("user", "message 6"), msg("assistant", "message 7")), false, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.prior {
				tc.prior[i].Seq = 0
			}
			ex := memory.Exchange{ID: "ex", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"},
				Prior: tc.prior, Turn: []memory.Message{msg("user", "next")}, Reply: msg("assistant", "ok"), Derived: tc.derived}
			all := stored(tc.conv)
			c := &SaveConv{LastSeq: int64(tc.conv)}
			limit := TailLen(ex)
			c.SetTail(all[max(0, len(all)-limit):], limit)
			p := PlanSave(ex, at, time.Time{}, false, c)
			wantSuperseded := 0
			if tc.wantFrom > 0 {
				wantSuperseded = tc.conv
			}
			if p.SupersedeFrom != tc.wantFrom || p.Result.Superseded != wantSuperseded || p.Result.Inserted != tc.wantPrior+2 {
				t.Fatalf("the save supersedes from %d (%d messages) and inserts %d; want from %d (%d), %d",
					p.SupersedeFrom, p.Result.Superseded, p.Result.Inserted, tc.wantFrom, wantSuperseded, tc.wantPrior+2)
			}
		})
	}
}
