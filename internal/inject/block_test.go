package inject

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// recountSections is sectionCosts as first written: every kept line
// counted again.
func (a *Assembler) recountSections(model string, sel selection) map[string]int {
	out := map[string]int{}
	for _, f := range sel.data.Pinned {
		out[partPinned] += a.lineCost(model, f.Statement())
	}
	if sel.data.Summary != "" {
		out[partSummary] = a.deps.Counter.Text(model, sel.data.Summary)
	}
	for _, f := range sel.data.Facts {
		out[partFacts] += a.lineCost(model, f.Statement())
	}
	for _, p := range sel.data.Passages {
		out[partRecall] += a.lineCost(model, passageLine(p))
	}
	return out
}

// TestSectionCostsMatchRecount checks that the line costs selectParts
// records, kept in step by shrink, add up to what counting the kept lines
// again gives, at every step of shrinking random selections.
func TestSectionCostsMatchRecount(t *testing.T) {
	counter := mustCounter(t)
	r := rand.New(rand.NewPCG(5, 6))
	g := &convGen{r: r}
	a, err := NewAssembler(Deps{History: &fakeMemory{}, Counter: counter}, Options{
		RecentMessages: 10, MaxContextTokens: 8000, CompletionReserve: 1024,
		Shares: Shares{Summary: 0.3, Facts: 0.15, Recall: 0.2}, FactsMax: 5,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const model = "gpt-4o-mini"
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for iter := range 200 {
		var ld loaded
		for i := r.IntN(8); i > 0; i-- {
			ld.facts = append(ld.facts, memory.Fact{Type: memory.FactGoal, Key: fmt.Sprintf("f%d", i), Value: g.text(), Pinned: r.IntN(2) == 0})
		}
		if r.IntN(2) == 0 {
			ld.summary = &memory.Summary{Version: 1, Text: g.text() + "\n" + g.text()}
		}
		for i := r.IntN(40); i > 0; i-- {
			ld.items = append(ld.items, memory.Item{Kind: "message", Ref: fmt.Sprintf("r%d", i), Conversation: "c" + fmt.Sprint(r.IntN(3)),
				Text: g.text(), CreatedAt: t0.Add(time.Duration(r.IntN(100)) * time.Hour)})
		}
		budget := 50 + r.IntN(2000)
		sel := a.selectParts(model, budget, budget, ld, true, func(memory.Item) bool { return true }, r.IntN(200))
		for {
			if got, want := a.sectionCosts(model, sel), a.recountSections(model, sel); !maps.Equal(got, want) {
				t.Fatalf("iter %d: sectionCosts %v, recounted %v", iter, got, want)
			}
			if !sel.shrink() {
				break
			}
		}
	}
}
