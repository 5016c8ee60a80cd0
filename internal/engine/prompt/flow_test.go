package prompt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestRecallTakesWhatOthersLeave covers budget-driven packing: with a short
// conversation (recent turns need little) and no summary or facts, the
// recalled passages fill far more than their own share, best first, and the
// prompt never passes the budget; with a long history the recent turns keep
// theirs.
func TestRecallTakesWhatOthersLeave(t *testing.T) {
	day := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	var items []memory.Item
	for i := range 200 {
		items = append(items, memory.Item{Kind: "message", Ref: fmt.Sprintf("old:%d", i), Conversation: "old",
			Text: fmt.Sprintf("passage %d: %s", i, strings.Repeat("words of an earlier turn ", 6)), SaidAt: day})
	}
	g := &convGen{}
	for _, tt := range []struct {
		name   string
		stored int
		fill   bool
	}{{"short conversation", 4, true}, {"short conversation, recall kept to its share", 4, false}, {"long conversation", 400, false}} {
		t.Run(tt.name, func(t *testing.T) {
			var stored []memory.Message
			for i := range tt.stored {
				role := "user"
				if i%2 == 1 {
					role = "assistant"
				}
				m := g.msg(role, fmt.Sprintf("recent turn %d %s", i, strings.Repeat("chatter ", 10)))
				m.Seq, m.Key = int64(i+1), fmt.Sprintf("k%d", i)
				stored = append(stored, m)
			}
			mem := &fakeMemory{stored: stored}
			a, err := NewAssembler(Deps{History: mem, Recaller: fakeRecaller{memory.Recalled{Items: items}}, Counter: mustCounter(t)},
				Options{RecentMessages: 1000, MaxContextTokens: 8000, CompletionReserve: 1024,
					Shares: Shares{Summary: 0.25, Pinned: 0.1, Facts: 0.1, Recall: 0.2}, FillRecall: tt.fill, Now: func() time.Time { return day }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := request(t, memory.ModeOn, `{"role":"user","content":"what did I say before?"}`)
			req.Model, req.Budget = "gpt-4o-mini", 4000
			p, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if p.TokensSent > 4000 {
				t.Fatalf("sent %d tokens over a 4000 budget", p.TokensSent)
			}
			share := int(0.2 * 4000)
			switch {
			case tt.fill:
				// The summary's and facts' shares and what the recent turns
				// left: nearly the whole budget.
				if p.Parts["recall"] < 3000 {
					t.Fatalf("recall took %d tokens (parts %v), want the budget's unused tokens", p.Parts["recall"], p.Parts)
				}
			default:
				// Recall keeps to its share: the recalled block is the
				// prompt's volatile part. The recent turns get the rest.
				if p.Parts["recall"] > share || p.Parts["recall"] < share-100 || (tt.stored > 100 && p.Parts["recent"] < 1000) {
					t.Fatalf("parts %v: recall should take its share, recent the rest", p.Parts)
				}
			}
			if n := len(p.Blocks); n == 0 || p.Blocks[n-1].Stable || !strings.Contains(p.Blocks[n-1].Text, "passage 0:") ||
				!strings.Contains(string(p.Messages[p.Blocks[n-1].At]), "passage 0:") {
				t.Fatalf("the best passage is not in the block")
			}
		})
	}
}
