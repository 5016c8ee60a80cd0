package prompt

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fakeRecaller answers every query with fixed facts and passages.
type fakeRecaller struct{ r memory.Recalled }

func (f fakeRecaller) Recall(context.Context, memory.RecallQuery) (memory.Recalled, error) {
	return f.r, nil
}

// TestAssembledPromptGolden pins one assembled prompt — system prompt,
// memory block with every section, recent turns with a tool call, current
// turn — and its accounting, in testdata/assembled.golden.json.
func TestAssembledPromptGolden(t *testing.T) {
	day := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	g := &convGen{}
	stored := []memory.Message{
		g.msg("user", "Old turn already summarised."),
		g.msg("assistant", "Old reply."),
		g.msg("user", "How much did I spend on trains this month?"),
		mustMsg(t, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"spending","arguments":"{\"category\":\"trains\"}"}}]}`),
		mustMsg(t, `{"role":"tool","tool_call_id":"call_1","content":"R$ 312,40"}`),
		g.msg("assistant", "You spent R$ 312,40 on trains this month."),
	}
	for i := range stored {
		stored[i].Seq = int64(i + 1)
		stored[i].Key = "ex:" + string(rune('a'+i))
	}
	mem := &fakeMemory{
		stored:  stored,
		summary: &memory.Summary{Version: 3, FromSeq: 1, ToSeq: 2, Text: "The user, Ana, lives in Lisbon and is saving for a trip to Japan.", CoveredTokens: 900},
	}
	rec := fakeRecaller{memory.Recalled{
		Facts: []memory.Fact{
			{Type: memory.FactGoal, Value: "I want to save R$ 5.000 by June.", Pinned: true},
			{Type: memory.FactProfile, Key: "city", Value: "Lisbon"},
			{Type: memory.FactPreference, Value: "Prefers short answers"},
		},
		Items: []memory.Item{
			{Kind: "message", Ref: "other:1", Conversation: "trip-planning", Text: "A rail pass in Japan costs about R$ 1.900.", CreatedAt: day},
			{Kind: "message", Ref: "ex:c", Conversation: "c", Text: "already in the window, so left out", CreatedAt: day},
		},
	}}
	a, err := NewAssembler(Deps{History: mem, Summaries: mem, Recaller: rec, Counter: mustCounter(t)}, Options{
		RecentMessages: 20, MaxContextTokens: 8000, CompletionReserve: 1024,
		Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 20,
		Now: func() time.Time { return day },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, memory.ModeOn, `{"role":"system","content":"You are a frugal finance coach."}`, `{"role":"user","content":"Can I afford the rail pass?"}`)
	req.Model = "gpt-4o-mini"
	p, err := a.Prepare(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(struct {
		Messages       []json.RawMessage `json:"messages"`
		TokensOriginal int               `json:"tokens_original"`
		TokensSent     int               `json:"tokens_sent"`
		Budget         int               `json:"budget"`
		Parts          map[string]int    `json:"parts"`
	}{p.Messages, p.TokensOriginal, p.TokensSent, p.Budget, p.Parts}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "assembled.golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("assembled prompt differs from %s (run with -update if intended):\n%s", path, got)
	}
}
