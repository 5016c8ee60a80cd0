package contract

import (
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestSaveReadsBoundedByCut: the stored messages a save reads to align
// and check a cut history (TailLen, HeadLen) do not grow with the
// client's history past what the cut keeps.
func TestSaveReadsBoundedByCut(t *testing.T) {
	const keep = 2000
	bound := max(keep, memory.BranchHead) + AlignSlack
	for _, n := range []int{keep + memory.BranchHead + 1, 10000, 60000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			history := make([]memory.Message, n)
			for i := range history {
				history[i] = memory.Message{Role: []string{"user", "assistant"}[i%2], Content: "ok"}
			}
			ex := memory.Exchange{Turn: []memory.Message{{Role: "user", Content: "and now?"}}, BranchSeed: "seed"}
			ex.Prior, ex.Skipped = memory.CutHistory(history, keep)
			if ex.Skipped != n-keep-memory.BranchHead || len(ex.Prior) != keep+memory.BranchHead {
				t.Fatalf("the cut kept %d and skipped %d", len(ex.Prior), ex.Skipped)
			}
			if got := TailLen(ex); got > bound {
				t.Errorf("a save reads %d newest messages, want at most %d", got, bound)
			}
			if got := HeadLen(ex); got > memory.BranchHead {
				t.Errorf("a save reads %d first messages, want at most %d", got, memory.BranchHead)
			}
		})
	}
}
