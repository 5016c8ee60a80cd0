package prompt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestExtractiveSummaryShare: a summary the extractive summariser wrote
// takes at most ExtractiveSummary of the budget, and the rest of the
// summary's share goes to the passages; a model's summary keeps the whole
// share.
func TestExtractiveSummaryShare(t *testing.T) {
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := &convGen{}
	var items []memory.Item
	for i := range 60 {
		items = append(items, memory.Item{Kind: "message", Conversation: "old", Ref: fmt.Sprintf("m%d", i), SaidAt: day,
			Text: fmt.Sprintf("passage %d: %s", i, strings.Repeat("words ", 30))})
	}
	long := strings.Repeat("User: a sentence picked from the conversation.\n", 60)
	tests := []struct {
		name, by       string
		extractive     float64
		wantSummaryMax int
		wantSummaryMin int
	}{
		{"extractive, share 0", memory.SummariserExtractive, 0, 0, 0},
		{"extractive, share 0.05", memory.SummariserExtractive, 0.05, 200, 100},
		{"model summary keeps the share", memory.SummariserModel, 0, 1000, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{stored: []memory.Message{g.msg("user", "hello"), g.msg("assistant", "hi")},
				summary: &memory.Summary{Text: long, ToSeq: 0, Summariser: tt.by}}
			a, err := NewAssembler(Deps{History: mem, Summaries: mem, Recaller: fakeRecaller{memory.Recalled{Items: items}}, Counter: mustCounter(t)},
				Options{RecentMessages: 10, Shares: Shares{Summary: 0.25, ExtractiveSummary: tt.extractive, Pinned: 0.1, Facts: 0.1, Recall: 0.2},
					FactsMax: 20, Now: func() time.Time { return day }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := request(t, memory.ModeOn, `{"role":"user","content":"what did we say?"}`)
			req.Model, req.Budget = "gpt-4o-mini", 4000
			p, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if s := p.Parts[partSummary]; s < tt.wantSummaryMin || s > tt.wantSummaryMax {
				t.Fatalf("summary took %d tokens (parts %v), want %d–%d", s, p.Parts, tt.wantSummaryMin, tt.wantSummaryMax)
			}
			if p.TokensSent > 4000 {
				t.Fatalf("sent %d tokens over a 4000 budget", p.TokensSent)
			}
			if tt.by == memory.SummariserExtractive && tt.extractive == 0 && p.Parts[partRecall] < int(0.4*4000) {
				t.Fatalf("passages took %d tokens (parts %v), want the summary's share too", p.Parts[partRecall], p.Parts)
			}
			if tt.by == memory.SummariserModel && p.Parts[partRecall] > int(0.2*4000) {
				t.Fatalf("passages took %d tokens (parts %v), want their share alone", p.Parts[partRecall], p.Parts)
			}
		})
	}
}
