package memory

import (
	"fmt"
	"slices"
	"testing"
)

// TestCutHistory: a history no longer than BranchHead+keep is kept whole;
// a longer one keeps its first BranchHead and newest keep messages, in
// order, and says how many it left out; keep below 1 cuts nothing.
func TestCutHistory(t *testing.T) {
	history := func(n int) []Message {
		out := make([]Message, n)
		for i := range out {
			out[i] = Message{Role: "user", Content: fmt.Sprint(i)}
		}
		return out
	}
	tests := []struct {
		n, keep, skipped int
	}{
		{0, 10, 0},
		{BranchHead + 10, 10, 0},
		{BranchHead + 11, 10, 1},
		{60000, 2000, 60000 - BranchHead - 2000},
		{60000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n, "/", tt.keep), func(t *testing.T) {
			h := history(tt.n)
			cut, skipped := CutHistory(h, tt.keep)
			if skipped != tt.skipped || Unstored(tt.n, tt.keep) != tt.skipped {
				t.Fatalf("skipped %d (Unstored %d), want %d", skipped, Unstored(tt.n, tt.keep), tt.skipped)
			}
			want := h
			if skipped > 0 {
				want = append(slices.Clone(h[:BranchHead]), h[tt.n-tt.keep:]...)
			}
			if !slices.EqualFunc(cut, want, func(a, b Message) bool { return a.Content == b.Content }) {
				t.Fatalf("cut %d messages, not the head and the newest", len(cut))
			}
			ex := Exchange{Prior: cut, Skipped: skipped}
			if w := ex.Window(); skipped > 0 && len(w) != tt.keep || skipped == 0 && len(w) != len(cut) {
				t.Fatalf("window of %d messages", len(w))
			}
		})
	}
}

// TestCutRequest: a request's Cut is its non-system messages split at
// the last assistant one (SplitAnswered) with the history cut by
// CutHistory, and the non-system messages outside its span [From, To) are
// exactly those it keeps, whatever the system messages and the turn's
// length.
func TestCutRequest(t *testing.T) {
	for _, tt := range []struct {
		name          string
		prior, turn   int
		systemEvery   int // a system message before every n-th message (0: none)
		keep, skipped int
	}{
		{"no history", 0, 2, 3, 4, 0},
		{"short", 10, 1, 0, 4, 0},
		{"at the bound", BranchHead + 4, 1, 0, 4, 0},
		{"past it", BranchHead + 40, 1, 0, 4, 36},
		{"with system messages and a tool turn", BranchHead + 40, 3, 7, 4, 36},
		{"no cut", 1000, 1, 0, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var msgs, nonSystem []Message
			for i := range tt.prior + tt.turn {
				if tt.systemEvery > 0 && i%tt.systemEvery == 0 {
					msgs = append(msgs, Message{Role: "system", Content: fmt.Sprint("s", i)})
				}
				role := []string{"user", "assistant"}[i%2]
				if i >= tt.prior {
					role = "tool"
				}
				if i == tt.prior-1 {
					role = "assistant"
				}
				m := Message{Role: role, Content: fmt.Sprint(i)}
				msgs, nonSystem = append(msgs, m), append(nonSystem, m)
			}
			prior, turn := SplitAnswered(nonSystem)
			cut, skipped := CutHistory(prior, tt.keep)
			if skipped != tt.skipped {
				t.Fatalf("CutHistory skipped %d, want %d", skipped, tt.skipped)
			}
			c := CutRequest(msgs, tt.keep)
			same := func(a, b Message) bool { return a.Content == b.Content }
			if c.Skipped != skipped || !slices.EqualFunc(c.Prior, cut, same) || !slices.EqualFunc(c.Turn, turn, same) {
				t.Fatalf("Cut skipped %d, %d prior and %d turn messages; want %d, %d and %d", c.Skipped, len(c.Prior), len(c.Turn), skipped, len(cut), len(turn))
			}
			from, to := c.From, c.To
			var outside []Message
			for i, m := range msgs {
				if !IsSystem(m.Role) && (i < from || i >= to) {
					outside = append(outside, m)
				}
			}
			want := append(slices.Clone(cut), turn...)
			if !slices.EqualFunc(outside, want, same) {
				t.Fatalf("outside the span [%d, %d): %d messages, want the %d kept", from, to, len(outside), len(want))
			}
		})
	}
}

// TestCutRequestBoundsTheTurn: a request whose current turn alone (the
// messages after its last assistant one: tens of thousands of user
// messages in a row, no reply among them) is longer than a resent history
// may be stores it cut as a history is — its first BranchHead and keep
// newest messages, the question last — and says how many it left out
// (TurnSkipped). Stored whole, 67,000 one-letter messages (2 MiB) cost
// about 10 CPU-seconds of inserts and indexing.
func TestCutRequestBoundsTheTurn(t *testing.T) {
	const keep = 4
	for _, tt := range []struct {
		name             string
		prior, turn      int
		wantTurn, wantTS int
	}{
		{"a turn within the bound", 2, BranchHead + keep, BranchHead + keep, 0},
		{"a turn past it", 0, BranchHead + keep + 50, BranchHead + keep, 50},
		{"a turn past it after a reply", 2, BranchHead + keep + 7, BranchHead + keep, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var msgs []Message
			for i := range tt.prior {
				msgs = append(msgs, Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprint("p", i)})
			}
			for i := range tt.turn {
				msgs = append(msgs, Message{Role: "user", Content: fmt.Sprint("t", i)})
			}
			c := CutRequest(msgs, keep)
			if len(c.Turn) != tt.wantTurn || c.TurnSkipped != tt.wantTS {
				t.Fatalf("turn of %d messages, %d left out; want %d and %d", len(c.Turn), c.TurnSkipped, tt.wantTurn, tt.wantTS)
			}
			turn := msgs[tt.prior:]
			want, _ := CutHistory(turn, keep)
			if !slices.EqualFunc(c.Turn, want, func(a, b Message) bool { return a.Content == b.Content }) {
				t.Fatal("the turn kept is not its first BranchHead and keep newest messages")
			}
			if c.Skipped != 0 || len(c.Prior) != tt.prior {
				t.Fatalf("prior cut: %d skipped, %d kept; want none and %d", c.Skipped, len(c.Prior), tt.prior)
			}
		})
	}
}
