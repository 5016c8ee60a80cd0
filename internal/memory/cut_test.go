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
