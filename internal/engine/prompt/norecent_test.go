package prompt

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPrepareNoRecent: with NoRecent (the provider holds the history) the
// stored turns are not sent, while the summary and pinned facts still are.
func TestPrepareNoRecent(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	stored := msgs(t, u1, a1)
	for i := range stored {
		stored[i].Seq = int64(i + 1)
	}
	mem := &fakeMemory{
		stored:  stored,
		summary: &memory.Summary{Version: 1, Text: "They planned a trip to Porto."},
		facts:   []memory.Fact{{Type: memory.FactGoal, Value: "The user is vegetarian.", Pinned: true}},
	}
	a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Counter: byteCounter{}},
		Options{RecentMessages: 10, Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.2}, FactsMax: 5, Now: func() time.Time { return now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		noRecent   bool
		wantRecent bool
	}{{false, true}, {true, false}} {
		req := request(t, memory.ModeOn, uNew)
		req.NoRecent = tc.noRecent
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		all := ""
		for _, m := range p.Messages {
			all += string(m) + "\n"
		}
		if !strings.Contains(all, "vegetarian") || !strings.Contains(all, "Porto") {
			t.Errorf("NoRecent=%v: memory missing from\n%s", tc.noRecent, all)
		}
		if got := strings.Contains(all, string(a1)); got != tc.wantRecent {
			t.Errorf("NoRecent=%v: stored turn sent = %v, want %v:\n%s", tc.noRecent, got, tc.wantRecent, all)
		}
		if !tc.wantRecent && p.Parts["recent"] != 0 {
			t.Errorf("NoRecent: recent part %d, want 0", p.Parts["recent"])
		}
	}
}
