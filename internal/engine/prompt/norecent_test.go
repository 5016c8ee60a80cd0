package prompt

import (
	"context"
	"errors"
	"slices"
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

// TestPrepareAskNewChat: a request the proxy could not tell for a new
// chat's first turn (AskNewChat set) is one when the question answers
// true: neither the stored turns nor the summary are sent, the pinned
// facts are; answering false, or failing (degraded "newchat"), it is a
// turn of its conversation. The question is asked only when the
// conversation's turns or summary load, and never alongside NewChat.
func TestPrepareAskNewChat(t *testing.T) {
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
		newChat, noRecent bool
		answer            bool
		err               error
		wantAsked         bool
		wantMemory        bool
		wantDegraded      bool
	}{
		{"answers true", false, false, true, nil, true, false, false},
		{"answers false", false, false, false, nil, true, true, false},
		{"fails", false, false, true, errors.New("redis down"), true, true, true},
		{"NewChat already", true, false, false, nil, false, false, false},
	} {
		req := request(t, memory.ModeOn, uNew)
		req.NewChat, req.NoRecent = tc.newChat, tc.noRecent
		asked := false
		req.AskNewChat = func(ctx context.Context) (bool, error) {
			asked = true
			if _, ok := ctx.Deadline(); !ok {
				t.Errorf("%s: asked without a deadline", tc.name)
			}
			return tc.answer, tc.err
		}
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		all := ""
		for _, m := range p.Messages {
			all += string(m) + "\n"
		}
		if asked != tc.wantAsked {
			t.Errorf("%s: asked = %v, want %v", tc.name, asked, tc.wantAsked)
		}
		if !strings.Contains(all, "vegetarian") {
			t.Errorf("%s: pinned fact missing from\n%s", tc.name, all)
		}
		if got := strings.Contains(all, "Porto"); got != tc.wantMemory {
			t.Errorf("%s: summary sent = %v, want %v:\n%s", tc.name, got, tc.wantMemory, all)
		}
		if got := strings.Contains(all, string(a1)); got != tc.wantMemory {
			t.Errorf("%s: stored turn sent = %v, want %v:\n%s", tc.name, got, tc.wantMemory, all)
		}
		if got := slices.Contains(p.Degraded, memory.DegradedNewChat); got != tc.wantDegraded {
			t.Errorf("%s: degraded %v, want newchat named: %v", tc.name, p.Degraded, tc.wantDegraded)
		}
	}

	// Nothing of the conversation to load (no summaries, no recent
	// turns): nothing to ask.
	b, err := NewAssembler(Deps{History: mem, Facts: mem, Counter: byteCounter{}},
		Options{RecentMessages: 10, Shares: Shares{Pinned: 0.1, Facts: 0.2}, FactsMax: 5, Now: func() time.Time { return now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, memory.ModeOn, uNew)
	req.NoRecent = true
	req.AskNewChat = func(context.Context) (bool, error) {
		t.Error("asked with nothing of the conversation to load")
		return false, nil
	}
	if _, err := b.Prepare(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}
