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
