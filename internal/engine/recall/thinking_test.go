package recall

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// thoughtReply is a reasoning model's reply as an OpenAI-compatible server
// relays it: its reasoning in a leading <think> block, then the answer.
const thoughtReply = "<think>Perhaps the user means Lyon, or the Marseille harbour; geography again.</think>\n\nParis is the capital of France."

// TestIndexerLeavesOutTheReplysReasoning: a reply is indexed (full text
// and embedding) as its answer, without the reasoning block it opened
// with: a query that matches only the reasoning finds nothing, one that
// matches the answer finds the reply.
func TestIndexerLeavesOutTheReplysReasoning(t *testing.T) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	ex := memory.Exchange{ID: "e1", Identity: id, At: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		Turn:  []memory.Message{{Role: "user", Content: "What is the capital of France?"}},
		Reply: memory.Message{Role: "assistant", Content: thoughtReply}}
	st := newFakeStore()
	emb := NewLocal(64)
	ix := NewIndexer(st, emb, nil)
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
		t.Fatal(err)
	}
	q := memory.ItemQuery{Tenant: "t", User: "u", Limit: 10}
	q.Text = "Lyon Marseille harbour"
	if got, err := st.SearchText(context.Background(), q); err != nil || len(got) != 0 {
		t.Errorf("a query on the reasoning found %+v (%v), want nothing", got, err)
	}
	q.Text = "Paris"
	got, err := st.SearchText(context.Background(), q)
	if err != nil || len(got) != 1 || got[0].Ref != "e1:1" {
		t.Fatalf("a query on the answer found %+v (%v), want the reply", got, err)
	}
	want, err := emb.Embed(context.Background(), []string{"Paris is the capital of France."}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range st.items {
		if it.Ref != "e1:1" {
			continue
		}
		if it.Text != "Paris is the capital of France." {
			t.Errorf("reply indexed as %q, want its answer alone", it.Text)
		}
		if !sameVector(it.Embedding, want[0]) {
			t.Errorf("reply embedded as something else than its answer")
		}
	}
}

// TestExpandShowsTheReplysAnswer: a recalled passage shows a reply, hit
// or around a hit, as its answer, without the reasoning block it opened
// with.
func TestExpandShowsTheReplysAnswer(t *testing.T) {
	f := &fakeContext{msgs: []memory.Message{
		{Conversation: "c", Seq: 1, Key: "k1", Role: "user", Content: "What is the capital of France?"},
		{Conversation: "c", Seq: 2, Key: "k2", Role: "assistant", Content: thoughtReply},
		{Conversation: "c", Seq: 3, Key: "k3", Role: "user", Content: "Thanks, noted for the trip."},
	}}
	for _, hit := range []memory.Item{
		{Kind: KindMessage, Conversation: "c", Ref: "k1", Text: "What is the capital of France?", Score: 1},
		{Kind: KindMessage, Conversation: "c", Ref: "k2", Text: "Paris is the capital of France.", Score: 1},
	} {
		got, err := expand(context.Background(), f, nil, "t", "u", []memory.Item{hit}, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !strings.Contains(got[0].Text, "assistant: Paris is the capital of France.") ||
			strings.Contains(got[0].Text, "Lyon") || strings.Contains(got[0].Text, "think>") {
			t.Errorf("hit %s: passages %+v, want the reply's answer alone", hit.Ref, got)
		}
	}
}

// TestQueryTextLeavesOutTheReplysReasoning: a short follow-up's query
// joins the reply before it as its answer, without its reasoning.
func TestQueryTextLeavesOutTheReplysReasoning(t *testing.T) {
	got := QueryText([]memory.Message{
		{Role: "user", Content: "What is the capital of France?"},
		{Role: "assistant", Content: thoughtReply},
		{Role: "user", Content: "and of Spain?"},
	})
	if want := "Paris is the capital of France.\nand of Spain?"; got != want {
		t.Errorf("QueryText = %q, want %q", got, want)
	}
}
