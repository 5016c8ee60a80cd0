package recall

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// recordingEmbedder records the texts it is asked to embed.
type recordingEmbedder struct {
	Embedder
	mu    sync.Mutex
	texts []string
}

func (r *recordingEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	r.mu.Lock()
	r.texts = append(r.texts, texts...)
	r.mu.Unlock()
	return r.Embedder.Embed(ctx, texts, by)
}

// TestSearchWholeQuery: by default the vector query is the question's
// words without stopwords; with WholeQuery it is the question as asked.
func TestSearchWholeQuery(t *testing.T) {
	const q = "Which musical instrument does Carla play?"
	for _, tc := range []struct {
		whole bool
		want  string
	}{
		{false, strings.Join(memory.QueryTerms(q, maxQueryTerms), " ")},
		{true, q},
	} {
		emb := &recordingEmbedder{Embedder: NewLocal(32)}
		s := NewSearcher(newFakeStore(), emb, SearchOptions{WholeQuery: tc.whole})
		if _, err := s.Search(context.Background(), SearchQuery{Tenant: "t", User: "u", Text: q}); err != nil {
			t.Fatal(err)
		}
		if len(emb.texts) != 1 || emb.texts[0] != tc.want || (tc.whole == (tc.want != q)) {
			t.Errorf("WholeQuery %v: embedded %q, want %q", tc.whole, emb.texts, tc.want)
		}
	}
}

// TestWholeQueryLeavesOutCommonWords: with WholeQuery, the question is
// embedded as asked but for the words most of the user's items hold (a
// speaker's name in every turn), possessive and all; a question of
// nothing else is embedded whole.
func TestWholeQueryLeavesOutCommonWords(t *testing.T) {
	st := countingStats{fakeStore: newFakeStore(), common: []string{"maria", "really", "s", "t"}}
	s := NewSearcher(st, NewLocal(64), SearchOptions{WholeQuery: true, Stats: st})
	tests := []struct{ in, want string }{
		{"What is the name of Maria's second puppy?", "What is the name of second puppy?"},
		{"Did MARIA’s sister really move to Porto?", "Did sister move to Porto?"},
		{"Maria, what do you think of Lisbon?", ", what do you think of Lisbon?"},
		{"Did Maria really?", "Did Maria really?"}, // stopwords and common words alone: whole
		{"Is Maria really ok?", "Is ok?"},
		{"Where does Mariana live?", "Where does Mariana live?"},
		{"What's Maria's dog called? I don't know", "What's dog called? I don't know"},
		{"Olá, Maria! Você viu o Zé?", "Olá, ! Você viu o Zé?"},
	}
	for _, tt := range tests {
		got, err := s.vectorText(context.Background(), nil, "t", "u", tt.in, memory.QueryTerms(tt.in, maxQueryTerms))
		if err != nil || got != tt.want {
			t.Errorf("vectorText(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestWholeQueryFactsShareTheQueryText: with WholeQuery the facts are
// ranked against the text the vector search embeds, so a question costs
// one encoder call, not two (the full question is never embedded).
func TestWholeQueryFactsShareTheQueryText(t *testing.T) {
	st := countingStats{fakeStore: newFakeStore(), common: []string{"maria"}}
	st.facts = []memory.Fact{{Tenant: "t", User: "u", Type: memory.FactProfile, Key: "pet", Value: "a puppy named Coco"}}
	emb := &recordingEmbedder{Embedder: NewLocal(64)}
	r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{WholeQuery: true, Stats: st}), emb, RecallOptions{FactsMax: 5, CrossConversation: true})
	const q = "What is the name of Maria's second puppy?"
	got, err := r.Recall(context.Background(), memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Text: q})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Facts) != 1 {
		t.Fatalf("facts %+v, want the one stored", got.Facts)
	}
	want := "What is the name of second puppy?"
	queries := 0
	for _, text := range emb.texts {
		switch text {
		case q:
			t.Fatalf("the whole question was embedded: %q", emb.texts)
		case want:
			queries++
		}
	}
	if queries != 2 { // the search's and the facts' (Cached shares them in the gateway)
		t.Fatalf("embedded %q, want %q for the search and the facts", emb.texts, want)
	}
}
