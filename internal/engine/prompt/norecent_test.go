package prompt

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPrepareNoRecentNewChat: with NoRecent (the provider holds the
// history) the stored turns are not sent, while the summary and pinned
// facts still are; with NewChat (a full-history app's new chat, landed in
// the default conversation) neither the stored turns nor the summary are,
// while pinned facts still are.
func TestPrepareNoRecentNewChat(t *testing.T) {
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
		name              string
		noRecent, newChat bool
		wantRecent        bool
		wantSummary       bool
	}{
		{"neither", false, false, true, true},
		{"NoRecent", true, false, false, true},
		{"NewChat", false, true, false, false},
	} {
		req := request(t, memory.ModeOn, uNew)
		req.NoRecent, req.NewChat = tc.noRecent, tc.newChat
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		all := ""
		for _, m := range p.Messages {
			all += string(m) + "\n"
		}
		if !strings.Contains(all, "vegetarian") {
			t.Errorf("%s: pinned fact missing from\n%s", tc.name, all)
		}
		if got := strings.Contains(all, "Porto"); got != tc.wantSummary {
			t.Errorf("%s: summary sent = %v, want %v:\n%s", tc.name, got, tc.wantSummary, all)
		}
		if got := strings.Contains(all, string(a1)); got != tc.wantRecent {
			t.Errorf("%s: stored turn sent = %v, want %v:\n%s", tc.name, got, tc.wantRecent, all)
		}
		if !tc.wantRecent && p.Parts["recent"] != 0 {
			t.Errorf("%s: recent part %d, want 0", tc.name, p.Parts["recent"])
		}
	}
}
