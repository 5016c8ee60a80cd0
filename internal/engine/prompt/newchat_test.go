package prompt

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPrepareNewChat: a request marked NewChat (a full-history app's new
// chat, landed in the default conversation) gets none of that
// conversation's stored turns nor its summary, while pinned facts still
// come; without the mark the stored turns and summary come as before.
func TestPrepareNewChat(t *testing.T) {
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
		newChat bool
		want    bool // the default conversation's turns and summary sent
	}{{false, true}, {true, false}} {
		req := request(t, memory.ModeOn, uNew)
		req.NewChat = tc.newChat
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		all := ""
		for _, m := range p.Messages {
			all += string(m) + "\n"
		}
		if !strings.Contains(all, "vegetarian") {
			t.Errorf("NewChat=%v: pinned fact missing from\n%s", tc.newChat, all)
		}
		if got := strings.Contains(all, string(a1)); got != tc.want {
			t.Errorf("NewChat=%v: stored turn sent = %v, want %v:\n%s", tc.newChat, got, tc.want, all)
		}
		if got := strings.Contains(all, "Porto"); got != tc.want {
			t.Errorf("NewChat=%v: summary sent = %v, want %v:\n%s", tc.newChat, got, tc.want, all)
		}
		if !tc.want && (p.Parts["recent"] != 0 || p.Parts["summary"] != 0) {
			t.Errorf("NewChat: parts %v, want no recent nor summary", p.Parts)
		}
	}
}
