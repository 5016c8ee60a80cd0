package recall_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// BenchmarkSearchWarm measures one Searcher.Search as a memory-on request
// makes it: a warm SQLite store (vectors, full-text index and items
// cached) holding a user's 1,200 turns of 384-dimensional local
// embeddings, TopK 81 (each ranking asks for 121 items), across
// conversations and within one.
func BenchmarkSearchWarm(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "memgate.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	emb := recall.NewLocal(384)
	words := strings.Fields(`sister viola greyhound Porto Lisbon vegan dinner recipe streaming subscription budget trip
		husband night shift rent euros car saving garden tomato bicycle commute office manager deadline doctor
		appointment knee running marathon coffee bakery weekend beach holiday flight hotel passport birthday
		party cake gift daughter school teacher homework piano lesson concert ticket museum painting novel
		library loan bank mortgage interest insurance kitchen renovation plumber neighbour dog walk park rain
		the a and I you my it was is to of in that for with on really today think`)
	r := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 1200
	items := make([]memory.Item, n)
	texts := make([]string, n)
	for i := range items {
		w := make([]string, 8+r.IntN(30))
		for j := range w {
			w[j] = words[r.IntN(len(words))]
		}
		texts[i] = "Mel: " + strings.Join(w, " ") + "."
		conv := "c1"
		if i%4 == 0 {
			conv = fmt.Sprintf("c%d", 2+i%7)
		}
		items[i] = memory.Item{Tenant: "t", User: "u", Conversation: conv, Kind: recall.KindMessage,
			Ref: fmt.Sprintf("e%d:%d", i/2, i%2), Text: texts[i], CreatedAt: t0.Add(time.Duration(i) * time.Minute)}
	}
	vecs, err := emb.Embed(ctx, texts, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range items {
		items[i].Embedding, items[i].Model, items[i].Dims = vecs[i], emb.Model(), emb.Dims()
	}
	if err := st.AddItems(ctx, items); err != nil {
		b.Fatal(err)
	}
	s := recall.NewSearcher(st, &memoEmbedder{Embedder: emb, m: map[string][]float32{}}, recall.SearchOptions{TopK: 81, RecencyHalfLife: 30 * 24 * time.Hour, Stats: st})
	for _, bm := range []struct{ name, conv string }{{"all", ""}, {"conversation", "c1"}} {
		b.Run(bm.name, func(b *testing.B) {
			q := recall.SearchQuery{Tenant: "t", User: "u", Conversation: bm.conv, Now: t0.Add(n * time.Minute),
				Text: "Mel, what did my sister say about the vegan dinner in Lisbon and the budget for the trip?"}
			if got, err := s.Search(ctx, q); err != nil || len(got) == 0 {
				b.Fatalf("Search = %d items, %v", len(got), err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Search(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// memoEmbedder embeds each text once: the query's vector comes from a
// cache, as a warm recall's does.
type memoEmbedder struct {
	recall.Embedder
	mu sync.Mutex
	m  map[string][]float32
}

func (e *memoEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v, ok := e.m[t]
		if !ok {
			vs, err := e.Embedder.Embed(ctx, []string{t}, by)
			if err != nil {
				return nil, err
			}
			v = vs[0]
			e.m[t] = v
		}
		out[i] = v
	}
	return out, nil
}
