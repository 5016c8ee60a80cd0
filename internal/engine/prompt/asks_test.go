package prompt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func TestAsks(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"I went hiking with my sister last weekend.", false},
		{"Thanks, that sounds great!", false},
		{"Where did I say the meeting was", true},
		{"what was the name of that cafe", true},
		{"Remind me of my savings goal.", true},
		{"Is it going to rain?", true},
		{"Quando foi a minha última consulta", true},
		{"Lembra do restaurante que eu falei", true},
		{"Fui ao mercado ontem.", false},
		{"", false},
		// A question put to the assistant alone asks its view or help,
		// not what the user said before.
		{"That sounds fun! What about you?", false},
		{"Nice bowl. Did you make it?", false},
		{"Can you explain how tides work?", false},
		{"What do you think?", false},
		{"E você, como está?", false},
		{"How are you? I moved to Porto last month.", false},
		// ... unless the user or the past is in it too.
		{"Do you remember the festival?", true},
		{"What do you think of my plan?", true},
		{"Can you tell me what we decided?", true},
		{"What did you recommend last week?", true},
		{"Você lembra do meu aniversário?", true},
		{"The groceries were 80 euros. What would you suggest to cut this week?", true},
		{"Você tem alguma dica?", true},
		{"Which book did you recommend?", true},
		{"What was the name of the place you suggested?", true},
		{"Is that the one you mentioned?", true},
		{"Qual filme você recomendou?", true},
		{"Você lembrou?", true},
		{"Really? And what did I say about Porto?", true},
		// A question about someone else is not put to the assistant.
		{"When did Caroline go to the support group?", true},
		{"Onde a Ana mora agora?", true},
		// An interrogative opener without a question mark.
		{"how do you pronounce it", false},
		{"tell me where I parked", true},
	} {
		if got := asks(tc.text); got != tc.want {
			t.Errorf("asks(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

// TestFillAskedFillsOnlyQuestions: with FillAsked, a turn that states
// something keeps its passages to the statement share, and a turn that
// asks gets every token the recent turns leave, as FillAlways gives
// every turn.
func TestFillAskedFillsOnlyQuestions(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var items []memory.Item
	for i := range 60 {
		items = append(items, memory.Item{ID: int64(i + 1), Kind: "message", Ref: fmt.Sprint("k", i), Conversation: "other",
			Text: fmt.Sprintf("Passage %d about trains, budgets and the trip to Lisbon in June.", i), Score: 1, CreatedAt: now.Add(-time.Hour)})
	}
	rec := recallFunc(func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
		return memory.Recalled{Items: items}, nil
	})
	const budget = 4000
	statement := `{"role":"user","content":"I booked the train to Lisbon."}`
	question := `{"role":"user","content":"When is my trip to Lisbon?"}`
	statementShare := 0.05
	recallTokens := func(when RecallFill, turn string) int {
		t.Helper()
		a, err := NewAssembler(Deps{History: &fakeMemory{}, Recaller: rec, Counter: byteCounter{}},
			Options{RecentMessages: 10, MaxContextTokens: budget, FillRecall: true, FillWhen: when,
				Shares: Shares{Recall: 0.2, StatementRecall: statementShare}, Now: func() time.Time { return now }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, turn))
		if err != nil {
			t.Fatal(err)
		}
		return p.Parts[partRecall]
	}
	if got := recallTokens(FillAsked, statement); got == 0 || got > budget/20 {
		t.Errorf("FillAsked, statement: passages take %d tokens, want some, at most %d", got, budget/20)
	}
	if got := recallTokens(FillAsked, question); got <= budget/5 {
		t.Errorf("FillAsked, question: passages take %d tokens, want them filled beyond the share %d", got, budget/5)
	}
	if got := recallTokens(FillAlways, statement); got <= budget/5 {
		t.Errorf("FillAlways, statement: passages take %d tokens, want them filled beyond the share %d", got, budget/5)
	}
	statementShare = 0
	if got := recallTokens(FillAsked, statement); got != 0 {
		t.Errorf("FillAsked, statement share 0: passages take %d tokens, want none", got)
	}
	if got := recallTokens(FillAsked, question); got <= budget/5 {
		t.Errorf("FillAsked, statement share 0, question: passages take %d tokens, want them filled beyond the share %d", got, budget/5)
	}
}

// TestStableFactsIgnoreTheTurn: with StableFacts the stable block shows
// the same facts whatever recall ranks first for the turn, and a fact
// learnt from a turn the prompt shows verbatim goes with the recalled
// block; without it the block follows the ranking.
func TestStableFactsIgnoreTheTurn(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mem := &fakeMemory{stored: msgs(t, u1, a1)}
	for i := range mem.stored {
		mem.stored[i].Seq = int64(i + 1)
		mem.stored[i].Key = fmt.Sprint("m", i+1)
	}
	var facts []memory.Fact
	for i := range 6 {
		facts = append(facts, memory.Fact{ID: int64(i + 1), Key: fmt.Sprint("topic_", i), Value: fmt.Sprint("value ", i),
			Conversation: "elsewhere", UpdatedAt: now.Add(time.Duration(i) * time.Minute)})
	}
	late := memory.Fact{ID: 99, Key: "name", Value: "Ana", Conversation: "c", Source: "m1", UpdatedAt: now}
	ranked := [][]memory.Fact{
		append([]memory.Fact{late}, facts...),
		append([]memory.Fact{facts[0], facts[1], facts[2]}, late, facts[3], facts[4], facts[5]),
	}
	prepare := func(fs []memory.Fact, stableOn bool, factsMax int) memory.Prepared {
		t.Helper()
		rec := recallFunc(func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
			return memory.Recalled{Facts: fs}, nil
		})
		a, err := NewAssembler(Deps{History: mem, Recaller: rec, Counter: byteCounter{}},
			Options{RecentMessages: 10, MaxContextTokens: 4000, FactsMax: factsMax, StableFacts: stableOn,
				Shares: Shares{Facts: 0.2, Recall: 0.2}, Now: func() time.Time { return now }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Blocks) == 0 || !p.Blocks[0].Stable {
			t.Fatalf("StableFacts=%v: no stable block:\n%s", stableOn, joined(p))
		}
		return p
	}
	for _, stableOn := range []bool{false, true} {
		// Three facts of seven: the ranking decides which, unless stable.
		b0, b1 := prepare(ranked[0], stableOn, 3).Blocks[0].Text, prepare(ranked[1], stableOn, 3).Blocks[0].Text
		if same := b0 == b1; same != stableOn {
			t.Errorf("StableFacts=%v: the stable block is the same for both rankings = %v\n%s\n---\n%s", stableOn, same, b0, b1)
		}
	}
	p := prepare(ranked[0], true, 10)
	if strings.Contains(p.Blocks[0].Text, "Ana") {
		t.Errorf("a fact of a turn shown verbatim is in the stable block:\n%s", p.Blocks[0].Text)
	}
	if last := p.Blocks[len(p.Blocks)-1]; last.Stable || !strings.Contains(last.Text, "Ana") {
		t.Errorf("the fact of a turn shown verbatim is not with the recalled block:\n%s", joined(p))
	}
}
