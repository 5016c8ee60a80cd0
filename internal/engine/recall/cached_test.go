package recall

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// gatedEmbedder embeds with the local embedder once its gate opens, and
// counts how often each text was embedded.
type gatedEmbedder struct {
	gate  chan struct{}
	local *Local
	mu    sync.Mutex
	texts map[string]int
	calls int
}

func newGated() *gatedEmbedder {
	return &gatedEmbedder{gate: make(chan struct{}), local: NewLocal(8), texts: map[string]int{}}
}

func (g *gatedEmbedder) Model() string { return "gated" }
func (g *gatedEmbedder) Dims() int     { return 8 }

func (g *gatedEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	g.mu.Lock()
	g.calls++
	for _, t := range texts {
		g.texts[t]++
	}
	g.mu.Unlock()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.local.Embed(ctx, texts, by)
}

func (g *gatedEmbedder) count(text string) (perText, calls int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.texts[text], g.calls
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// has reports whether c holds text's vector embedded on nobody's behalf.
func (c *memCache) has(model string, dims int, text string) bool {
	_, ok := c.Get(EmbeddingKey{Model: model, Dims: dims, Hash: ContentHash(model, text)})
	return ok
}

func TestCachedSharesConcurrentIdenticalCalls(t *testing.T) {
	g := newGated()
	c := NewCached(g, &memCache{}, nil)
	const query = "what's the weather there?"
	var wg sync.WaitGroup
	results := make([][][]float32, 6)
	errs := make([]error, 6)
	for i := range 5 {
		wg.Go(func() { results[i], errs[i] = c.Embed(context.Background(), []string{query}, time.Time{}) })
	}
	// Recall ranks facts with the query in the same batch: the query joins.
	wg.Go(func() {
		results[5], errs[5] = c.Embed(context.Background(), []string{query, "goal: trip to Kyoto"}, time.Time{})
	})
	waitFor(t, "the first call", func() bool { n, _ := g.count(query); return n >= 1 })
	close(g.gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if Cosine(results[i][0], results[0][0]) < 0.9999 {
			t.Fatalf("caller %d got another vector", i)
		}
	}
	if n, _ := g.count(query); n != 1 {
		t.Fatalf("the query was embedded %d times, want once", n)
	}
}

func TestCachedWritesTheCacheAfterTheCallerGaveUp(t *testing.T) {
	g := newGated()
	cache := &memCache{}
	c := NewCached(g, cache, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Embed(ctx, []string{"I'm in Kyoto"}, time.Time{})
		errc <- err
	}()
	waitFor(t, "the call", func() bool { _, n := g.count(""); return n == 1 })
	cancel() // the request ends while the provider is still answering
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the caller's cancellation", err)
	}
	close(g.gate)
	waitFor(t, "the vector in the cache", func() bool { return cache.has("gated", 8, "I'm in Kyoto") })
	if _, err := c.Embed(context.Background(), []string{"I'm in Kyoto"}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, calls := g.count(""); calls != 1 {
		t.Fatalf("%d provider calls, want 1: the next request must find the cached vector", calls)
	}
}

// slowWriteCache is a memCache whose writes wait for their gate.
type slowWriteCache struct {
	*memCache
	gate chan struct{}
}

func (c *slowWriteCache) PutSince(epoch uint64, k EmbeddingKey, v []float32) bool {
	<-c.gate
	return c.memCache.PutSince(epoch, k, v)
}

// TestCachedFlightAnswersUntilItsVectorsAreCached: a text whose call has
// answered but whose vectors are not yet in the cache is answered by that
// call, not embedded again; once they are, by the cache.
func TestCachedFlightAnswersUntilItsVectorsAreCached(t *testing.T) {
	g := newGated()
	close(g.gate)
	cache := &slowWriteCache{memCache: &memCache{}, gate: make(chan struct{})}
	c := NewCached(g, cache, nil)
	const text = "my sister is called Ana"
	for range 2 { // the second while the first call's vectors wait to be written
		if _, err := c.Embed(context.Background(), []string{text}, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	close(cache.gate)
	waitFor(t, "the vector in the cache", func() bool { return cache.has("gated", 8, text) })
	waitFor(t, "the flight to settle", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.inflight) == 0
	})
	if _, err := c.Embed(context.Background(), []string{text}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n, calls := g.count(text); n != 1 || calls != 1 {
		t.Fatalf("text embedded %d times in %d calls, want once", n, calls)
	}
}

func TestCachedEmbedDeadlineFailsLateWithoutCancelling(t *testing.T) {
	g := newGated()
	cache := &memCache{}
	c := NewCached(g, cache, nil)
	ctx := context.Background()
	_, err := c.Embed(ctx, []string{"and in Porto?"}, time.Now().Add(5*time.Millisecond))
	if !errors.Is(err, ErrEmbeddingLate) {
		t.Fatalf("err = %v, want ErrEmbeddingLate", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the caller's context must stay usable for a full-text search")
	}
	close(g.gate)
	waitFor(t, "the late vector in the cache", func() bool { return cache.has("gated", 8, "and in Porto?") })
}

func TestRecallFallsBackToFullTextWhenTheQueryEmbeddingIsLate(t *testing.T) {
	st := newFakeStore()
	local := NewLocal(8)
	item := memory.Item{Tenant: "t", User: "u", Conversation: "c", Kind: KindMessage, Ref: "x:0", Text: "I'm staying in Kyoto next week",
		Model: "gated", Dims: 8, CreatedAt: time.Now()}
	vec, _ := local.Embed(context.Background(), []string{item.Text}, time.Time{})
	item.Embedding = vec[0]
	if err := st.AddItems(context.Background(), []memory.Item{item}); err != nil {
		t.Fatal(err)
	}
	st.facts = []memory.Fact{{Tenant: "t", User: "u", Type: memory.FactGoal, Key: "goal", Value: "visit temples", Pinned: true}}
	g := newGated()
	t.Cleanup(func() { close(g.gate) })
	emb := NewCached(g, &memCache{}, nil)
	r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{TopK: 5}), emb, RecallOptions{FactsMax: 5, CrossConversation: true})
	got, err := r.Recall(context.Background(), memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Text: "what's the weather in Kyoto?",
		EmbedBy: time.Now().Add(5 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Lexical {
		t.Fatal("Lexical = false, want true")
	}
	if len(got.Items) != 1 || got.Items[0].Ref != "x:0" {
		t.Fatalf("items = %+v, want the full-text match", got.Items)
	}
	if len(got.Facts) != 1 {
		t.Fatalf("facts = %+v, want the pinned fact ranked without relevance", got.Facts)
	}
}

// wrongDims answers every text with a vector one dimension short.
type wrongDims struct{ *Local }

func (w wrongDims) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	vecs, err := w.Local.Embed(ctx, texts, by)
	for i := range vecs {
		vecs[i] = vecs[i][:len(vecs[i])-1]
	}
	return vecs, err
}

// TestCachedKeepsOnlyVectorsOfTheModelsDimension: Cached decides what is a
// vector: one of
// another length (a corrupted value, another dimension) read from the
// cache is a miss, embedded again; one of another length embedded is not
// kept.
func TestCachedKeepsOnlyVectorsOfTheModelsDimension(t *testing.T) {
	ctx := context.Background()
	local := NewLocal(8)
	t.Run("a short cached value is a miss", func(t *testing.T) {
		cache := &memCache{}
		cache.Put(EmbeddingKey{Model: local.Model(), Dims: 8, Hash: ContentHash(local.Model(), "hi there")}, []float32{1, 2, 3})
		got, err := NewCached(local, cache, nil).Embed(ctx, []string{"hi there"}, time.Time{})
		if err != nil || len(got) != 1 || len(got[0]) != 8 {
			t.Fatalf("Embed = %v, %v; want the embedder's 8-dimensional vector", got, err)
		}
	})
	t.Run("a short embedded vector is not kept", func(t *testing.T) {
		cache := &memCache{}
		// The write happens after the answer: wait until the flight is
		// settled, then nothing may be cached.
		c := NewCached(wrongDims{local}, cache, nil)
		if _, err := c.Embed(ctx, []string{"another"}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the flight to settle", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.inflight) == 0 })
		if cache.has(local.Model(), 8, "another") || len(cache.m) != 0 {
			t.Fatalf("cached %d vectors of the wrong dimension", len(cache.m))
		}
	})
}
