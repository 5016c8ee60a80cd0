package prompt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPinsWithinTheirShare: with more pins than the pinned share holds,
// the pinned part stays within it; the pin recall ranks most relevant to
// the turn and the most recent pins win; a pin left out of the share that
// recall ranks for the turn still comes, as a fact; the passages still
// fill their share.
func TestPinsWithinTheirShare(t *testing.T) {
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pin := func(i int) memory.Fact {
		return memory.Fact{Tenant: "t", User: "u", Type: memory.FactPreference, Key: fmt.Sprintf("pref_%02d", i),
			Value:  fmt.Sprintf("I prefer option number %d for the weekly plan %s", i, strings.Repeat("detail ", 6)),
			Pinned: true, UpdatedAt: day.Add(-time.Duration(i) * time.Hour)}
	}
	var pins []memory.Fact
	for i := range 60 {
		pins = append(pins, pin(i))
	}
	relevant := pin(59) // the oldest pin, but recall ranks it first for the turn
	relevant.Value = "I am allergic to shellfish"
	pins[59] = relevant
	overflow := pins[45] // old and unrelated, but recall ranks it second
	g := &convGen{}
	var items []memory.Item
	for i := range 30 {
		items = append(items, memory.Item{Kind: "message", Conversation: "old", Ref: fmt.Sprintf("m%d", i), SaidAt: day,
			Text: fmt.Sprintf("passage %d: %s", i, strings.Repeat("words ", 40))})
	}
	mem := &fakeMemory{stored: []memory.Message{g.msg("user", "hello"), g.msg("assistant", "hi")}, facts: pins}
	rec := fakeRecaller{memory.Recalled{Facts: []memory.Fact{relevant, overflow}, Items: items}}
	a, err := NewAssembler(Deps{History: mem, Facts: mem, Recaller: rec, Counter: mustCounter(t)},
		Options{RecentMessages: 10, Shares: Shares{Summary: 0.25, Pinned: 0.1, Facts: 0.1, Recall: 0.2}, FactsMax: 20,
			Now: func() time.Time { return day }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, memory.ModeOn, `{"role":"user","content":"what can I cook for dinner tonight?"}`)
	req.Model, req.Budget = "gpt-4o-mini", 4000
	p, err := a.Prepare(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Parts[partPinned]; got == 0 || got > 400 {
		t.Fatalf("pinned part %d tokens (parts %v), want some and at most 10%% of 4000", got, p.Parts)
	}
	text := ""
	for _, b := range p.Blocks {
		text += b.Text
	}
	if !strings.Contains(text, "shellfish") {
		t.Fatalf("the pin recall ranked first for the turn is missing:\n%s", text)
	}
	if !strings.Contains(text, pins[0].Value) {
		t.Fatalf("the most recent pin is missing:\n%s", text)
	}
	if !strings.Contains(text, overflow.Value) {
		t.Fatalf("a pin recall ranked for the turn, left out of the pinned share, is not among the facts:\n%s", text)
	}
	if strings.Contains(text, pins[40].Value) {
		t.Fatalf("an old pin recall did not rank took the share's place:\n%s", text)
	}
	if p.Parts[partRecall] < int(0.2*4000)-minPassageCost*8 {
		t.Fatalf("passages took %d tokens (parts %v), want their share", p.Parts[partRecall], p.Parts)
	}
}

// TestPinnedSentenceShownOnce: a sentence pinned twice (under two keys, as
// when two rules match it or it is said again) takes one line of the
// block, in the pinned part, and never comes again as a fact; pins that
// differ are all shown.
func TestPinnedSentenceShownOnce(t *testing.T) {
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pin := func(key, value string, age time.Duration) memory.Fact {
		return memory.Fact{Tenant: "t", User: "u", Type: memory.FactPreference, Key: key, Value: value, Pinned: true, UpdatedAt: day.Add(-age)}
	}
	const twice = "I chose them because they help families with adoption."
	tests := []struct {
		name  string
		facts []memory.Fact
		want  map[string]int // line text → times in the block
	}{
		{"same sentence, two keys", []memory.Fact{pin("decision_adoption", twice, time.Hour), pin("goal_adoption", twice, 2*time.Hour), pin("diet", "I'm vegetarian", 3*time.Hour)},
			map[string]int{twice: 1, "I'm vegetarian": 1}},
		{"same sentence, other case and punctuation", []memory.Fact{pin("a", twice, time.Hour), pin("b", strings.ToUpper(strings.TrimSuffix(twice, ".")), 2*time.Hour)},
			map[string]int{twice: 1}},
		{"different sentences", []memory.Fact{pin("a", twice, time.Hour), pin("b", "I live in Lisbon", 2*time.Hour)},
			map[string]int{twice: 1, "I live in Lisbon": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &convGen{}
			mem := &fakeMemory{stored: []memory.Message{g.msg("user", "hello"), g.msg("assistant", "hi")}, facts: tt.facts}
			rec := fakeRecaller{memory.Recalled{Facts: tt.facts}}
			a, err := NewAssembler(Deps{History: mem, Facts: mem, Recaller: rec, Counter: mustCounter(t)},
				Options{RecentMessages: 10, Shares: Shares{Summary: 0.25, Pinned: 0.1, Facts: 0.1, Recall: 0.2}, FactsMax: 20,
					Now: func() time.Time { return day }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := request(t, memory.ModeOn, `{"role":"user","content":"what should I do this weekend?"}`)
			req.Model, req.Budget = "gpt-4o-mini", 4000
			p, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			text := ""
			for _, b := range p.Blocks {
				text += b.Text
			}
			lines := 0
			for _, l := range strings.Split(text, "\n") {
				if strings.HasPrefix(l, "- ") {
					lines++
				}
			}
			want := 0
			for s, n := range tt.want {
				want += n
				if got := strings.Count(strings.ToLower(text), strings.ToLower(strings.TrimSuffix(s, "."))); got != n {
					t.Fatalf("%q shown %d times, want %d:\n%s", s, got, n, text)
				}
			}
			if lines != want {
				t.Fatalf("%d lines in the block, want %d:\n%s", lines, want, text)
			}
		})
	}
}
