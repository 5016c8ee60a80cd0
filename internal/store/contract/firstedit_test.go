package contract

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestFirstMessageEditSupersedesFromStart: a named conversation's client
// that resends its history with the first message changed and every
// message after it as stored (at least two of them, one the user's, or a
// history cut after them) edits the chat from its first message: the save
// supersedes every live message and stores the history as the new branch.
// Anything weaker is stored beside the branch, which stays live: a derived
// conversation's save, one that compared only the newest part of a longer
// conversation, one whose history shares not even the second message with
// the stored branch (another chat under the same name, a client that
// summarised its first messages), another chat under the same name whose
// first reply is the stored one's (a greeting: replies repeat across
// chats), one resending a message after the first otherwise than stored,
// or more messages than the branch holds, and one whose only matching
// messages are replies.
func TestFirstMessageEditSupersedesFromStart(t *testing.T) {
	msg := func(role, text string) memory.Message { return memory.Message{Role: role, Content: text} }
	stored := func(n int) []memory.Message {
		var out []memory.Message
		for i := range n {
			out = append(out, msg([]string{"user", "assistant"}[i%2], fmt.Sprint("message ", i)))
		}
		return out
	}
	edited := func(n int) []memory.Message {
		prior := stored(n)
		prior[0] = msg("user", "message 0, edited")
		return prior
	}
	const greeting = "Hello! How can I assist you today?"
	greeted := []memory.Message{msg("user", "hi"), msg("assistant", greeting), msg("user", "My sister collects barometers."),
		msg("assistant", "What a lovely hobby."), msg("user", "What should I get her?"), msg("assistant", "A barometer stand.")}
	// replies is a branch whose second and third messages are both the
	// assistant's (a reply, then a tool call without text).
	replies := []memory.Message{msg("user", "hi"), msg("assistant", greeting), msg("assistant", ""),
		msg("tool", "42"), msg("assistant", "The answer is 42."), msg("user", "thanks")}
	changed := edited(6)
	changed[3] = msg("assistant", "message 3, otherwise")
	at := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name      string
		held      []memory.Message // the live branch (nil: stored(conv))
		conv      int              // live messages stored, when held is nil
		prior     []memory.Message
		derived   bool
		wantFrom  int64
		wantPrior int
	}{
		{"rest resent", nil, 6, edited(6), false, 1, 6},
		{"rest cut but two", nil, 6, edited(3), false, 1, 3},
		// The reply alone matching is what another chat opening alike
		// under the same name shows: stored beside, the safe way.
		{"rest cut but one", nil, 6, edited(2), false, 0, 2},
		{"another chat greeted alike", greeted, 0, []memory.Message{msg("user", "hey"), msg("assistant", greeting)}, false, 0, 2},
		{"an edit resent whole, greeted alike", greeted, 0, append([]memory.Message{msg("user", "hello")}, greeted[1:]...), false, 1, 6},
		{"only replies match", replies, 0, []memory.Message{msg("user", "hey"), msg("assistant", greeting), msg("assistant", ""), msg("tool", "42")}, false, 0, 4},
		{"a later message resent otherwise", nil, 6, changed, false, 0, 6},
		{"more than the branch holds", nil, 4, edited(6), false, 0, 6},
		{"derived", nil, 6, edited(6), true, 0, 6},
		{"beyond the compared tail", nil, 2*AlignSlack + 6, edited(6), false, 0, 6},
		{"first messages summarised", nil, 6, []memory.Message{msg("user", "summary of messages 0 to 2"), msg("assistant", "message 3"), msg("user", "message 4"), msg("assistant", "message 5")}, false, 0, 4},
		{"another chat under the name", nil, 6, []memory.Message{msg("user", "another chat"), msg("assistant", "its reply")}, false, 0, 2},
		{"continuation", nil, 6, append(stored(6), msg("user", "message 6"), msg("assistant", "message 7")), false, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := slices.Clone(tc.held)
			if all == nil {
				all = stored(tc.conv)
			}
			for i := range all {
				all[i].Seq = int64(i + 1)
			}
			ex := memory.Exchange{ID: "ex", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"},
				Prior: tc.prior, Turn: []memory.Message{msg("user", "next")}, Reply: msg("assistant", "ok"), Derived: tc.derived}
			c := &SaveConv{LastSeq: int64(len(all))}
			limit := TailLen(ex)
			c.SetTail(all[max(0, len(all)-limit):], limit)
			p := PlanSave(ex, at, time.Time{}, false, c)
			wantSuperseded := 0
			if tc.wantFrom > 0 {
				wantSuperseded = len(all)
			}
			if p.SupersedeFrom != tc.wantFrom || p.Result.Superseded != wantSuperseded || p.Result.Inserted != tc.wantPrior+2 {
				t.Fatalf("the save supersedes from %d (%d messages) and inserts %d; want from %d (%d), %d",
					p.SupersedeFrom, p.Result.Superseded, p.Result.Inserted, tc.wantFrom, wantSuperseded, tc.wantPrior+2)
			}
		})
	}
}
