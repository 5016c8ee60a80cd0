package recall

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func TestRankPassages(t *testing.T) {
	p := func(ref, text string, score float64) memory.Item {
		return memory.Item{Kind: KindMessage, Conversation: "c", Ref: ref, Text: text, Score: score}
	}
	tests := []struct {
		name     string
		query    string
		passages []memory.Item
		want     []string // refs, best first
	}{
		{"a passage showing more of the question comes first", "What did Melanie paint last week?",
			[]memory.Item{
				p("beach", "user: Melanie, did you go anywhere fun?\nassistant: We went to the beach.", 1),
				p("sunset", "user: What are you painting these days?\nassistant: A sunset over the lake, last week.", 0.9),
			},
			[]string{"sunset", "beach"}},
		{"a far better hit stays first", "What did Melanie paint last week?",
			[]memory.Item{
				p("beach", "user: did you go anywhere fun?\nassistant: We went to the beach.", 1),
				p("sunset", "user: Melanie painted a sunset last week.", 0.3),
			},
			[]string{"beach", "sunset"}},
		{"equal shares keep the search's order", "hiking trip",
			[]memory.Item{p("a", "user: the hiking trip", 0.8), p("b", "user: a hiking trip", 0.8), p("c", "assistant: our trip hiking", 0.8)},
			[]string{"a", "b", "c"}},
		{"inflected forms count (queryMatcher's stems)", "allergies",
			[]memory.Item{p("none", "user: I like shrimp", 0.6), p("stem", "user: I'm allergic to shellfish", 0.5)},
			[]string{"stem", "none"}},
		{"a query without words leaves the order", "?!",
			[]memory.Item{p("a", "user: x", 0.2), p("b", "user: what did you paint", 0.9)},
			[]string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := slices.Clone(tt.passages)
			rankPassages(ps, newQueryMatcher(tt.query))
			var got []string
			for _, it := range ps {
				got = append(got, it.Ref)
				if it.Score <= 0 || it.Score > 1 {
					t.Errorf("%s: score %v outside (0, 1]", it.Ref, it.Score)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRecallRanksPassagesByWhatTheyShow: a turn that repeats one word of
// the question ranks first in the search, but the exchange whose question
// and answer together hold all of it is recalled first.
func TestRecallRanksPassagesByWhatTheyShow(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	msgs := []memory.Message{
		{Role: "user", Content: "Any plans for the weekend?"},
		{Role: "assistant", Content: "Pottery, pottery and more pottery, then the market."},
		{Role: "user", Content: "Which class did you sign up for?"},
		{Role: "assistant", Content: "A pottery class, it starts Monday."},
	}
	f := &fakeContext{}
	st := newFakeStore()
	for i, m := range msgs {
		m.Conversation, m.Seq, m.Key = "c", int64(i+1), "k"+string(rune('1'+i))
		m.CreatedAt = now.Add(time.Duration(i/2)*24*time.Hour + time.Duration(i)*time.Minute) // two days' exchanges
		f.msgs = append(f.msgs, m)
		if err := st.AddItems(context.Background(), []memory.Item{{Tenant: "t", User: "u", Kind: KindMessage, Conversation: "c",
			Ref: m.Key, Text: m.Content, CreatedAt: m.CreatedAt}}); err != nil {
			t.Fatal(err)
		}
	}
	emb := NewLocal(384)
	r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: 1}), emb,
		RecallOptions{CrossConversation: true, ContextTurns: 1, Around: f})
	got, err := r.Recall(context.Background(), memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"},
		Text: "Which pottery class did she take?", Now: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) < 2 {
		t.Fatalf("recalled %d passages, want 2: %+v", len(got.Items), got.Items)
	}
	if first := got.Items[0].Text; first != "user: Which class did you sign up for?\nassistant: A pottery class, it starts Monday." {
		t.Errorf("first passage = %q, want the class question and its answer", first)
	}
}
