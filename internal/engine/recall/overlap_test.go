package recall

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// gatedStats is a fakeStore with term statistics that answer only once the
// full-text search has started (or fail after a deadline).
type gatedStats struct {
	*fakeStore
	textStarted chan struct{}
}

func (g *gatedStats) SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	select {
	case <-g.textStarted:
	default:
		close(g.textStarted)
	}
	return g.fakeStore.SearchText(ctx, q)
}

func (g *gatedStats) CommonTerms(ctx context.Context, _ *memory.Revisions, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	select {
	case <-g.textStarted:
		return nil, nil
	case <-time.After(10 * time.Second):
		return nil, errors.New("the full-text search did not start while term statistics were read")
	}
}

// TestSearchTextOverlapsVectorQuery checks the full-text ranking runs while
// the vector query's term statistics are read (a remote store then costs
// one round trip less), and the results are the usual ones.
func TestSearchTextOverlapsVectorQuery(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	emb := NewLocal(384)
	st := &gatedStats{fakeStore: newFakeStore(), textStarted: make(chan struct{})}
	mustIndex(t, st.fakeStore, emb,
		memory.Item{Tenant: "t1", User: "u1", Conversation: "A", Ref: "a:0", Text: "I am vegetarian and I live in Lisbon", CreatedAt: now},
		memory.Item{Tenant: "t1", User: "u1", Conversation: "A", Ref: "a:1", Text: "The meeting moved to Tuesday", CreatedAt: now},
	)
	s := NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: 0.2, Stats: st})
	got, err := s.Search(context.Background(), SearchQuery{Tenant: "t1", User: "u1", Text: "vegetarian dinner in Lisbon?", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:0"}; !eqStrings(refs(got), want) {
		t.Fatalf("refs = %v, want %v", refs(got), want)
	}
}
