package sqlite_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// mustSearchCorpus stores n items of dims-dimension random vectors for
// acme/alice, in batches, and returns a query vector.
func mustSearchCorpus(b *testing.B, s *sqlite.Store, n, dims int) []float32 {
	b.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	vec := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const batch = 500
	for start := 0; start < n; start += batch {
		items := make([]memory.Item, 0, batch)
		for i := start; i < min(n, start+batch); i++ {
			items = append(items, memory.Item{
				Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("c%d", i%20),
				Kind: "message", Ref: fmt.Sprintf("ex-%d:0", i),
				Text:      fmt.Sprintf("turn %d about savings, trips and the weather in Lisbon", i),
				Embedding: vec(), Model: "bench", Dims: dims,
			})
		}
		if err := s.AddItems(context.Background(), items); err != nil {
			b.Fatal(err)
		}
	}
	return vec()
}

// BenchmarkSearchVector measures a top-10 cosine search over one user's
// 10,000 items of 384 dimensions: from the in-memory index, and for a
// user too large for it (a vector cache that keeps no one), whose vectors
// are read from the file at every search.
func BenchmarkSearchVector(b *testing.B) {
	for _, bc := range []struct {
		name     string
		tooLarge bool
	}{{"indexed", false}, {"too-large", true}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := mustTempStore(b)
			if bc.tooLarge {
				sqlite.SetVectorCacheLimit(s, 1)
			}
			const n, dims = 10_000, 384
			q := mustSearchCorpus(b, s, n, dims)
			ctx := context.Background()
			query := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: q, Model: "bench", Dims: dims, Limit: 10}
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.SearchVector(ctx, query)
				if err != nil || len(got) != 10 {
					b.Fatalf("SearchVector = %d items, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkSearchText measures a top-10 full-text search over the same
// corpus, with a question whose words all match every item.
func BenchmarkSearchText(b *testing.B) {
	s, _ := mustTempStore(b)
	mustSearchCorpus(b, s, 10_000, 384)
	ctx := context.Background()
	query := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "what did I say about the weather in Lisbon?", Limit: 10}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.SearchText(ctx, query)
		if err != nil || len(got) != 10 {
			b.Fatalf("SearchText = %d items, %v", len(got), err)
		}
	}
}

// BenchmarkSearchTextManyUsers measures one user's top-10 full-text search
// in a store shared by 100 users with 100 items each, all sharing words: the
// search must cost what the user's items cost, not what the store holds.
func BenchmarkSearchTextManyUsers(b *testing.B) {
	s, _ := mustTempStore(b)
	ctx := context.Background()
	for u := range 100 {
		items := make([]memory.Item, 0, 100)
		for i := range 100 {
			items = append(items, memory.Item{
				Tenant: "acme", User: fmt.Sprintf("user%d", u), Conversation: "c",
				Kind: "message", Ref: fmt.Sprintf("u%d-ex-%d:0", u, i),
				Text: fmt.Sprintf("turn %d about savings, trips and the weather in Lisbon", i),
			})
		}
		if err := s.AddItems(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	query := memory.ItemQuery{Tenant: "acme", User: "user7", Text: "what did I say about the weather in Lisbon?", Limit: 10}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.SearchText(ctx, query)
		if err != nil || len(got) != 10 {
			b.Fatalf("SearchText = %d items, %v", len(got), err)
		}
	}
}
