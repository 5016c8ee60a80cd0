package recall

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
)

// TestCachedErasureCancelsTheEmbeddingInFlight: the embedder is embedding
// a user's text when the user is erased (Calls.Forget): the call's
// context is cancelled by the time the erasure returns, the caller gets
// ErrErased, and no vector of it is cached.
func TestCachedErasureCancelsTheEmbeddingInFlight(t *testing.T) {
	g, vectors, calls := newGated(), &memCache{}, cache.NewCalls()
	c := NewCached(g, vectors, calls)
	ctx := cache.WithEpoch(context.Background(), cache.Epoch())
	errs := make(chan error, 1)
	go func() {
		_, err := c.EmbedOwned(ctx, ownedBy("t", "noor", "I live in Porto."), time.Time{})
		errs <- err
	}()
	waitFor(t, "the embedding call", func() bool { _, n := g.count("I live in Porto."); return n == 1 })
	calls.Forget("t", "noor")
	if err := <-errs; !errors.Is(err, cache.ErrErased) {
		t.Fatalf("the erased user's embedding: %v, want ErrErased", err)
	}
	close(g.gate)
	if _, ok := vectors.Get(EmbeddingKey{Model: "gated", Dims: 8, Tenant: "t", User: "noor", Hash: ContentHash("gated", "I live in Porto.")}); ok {
		t.Error("the erased user's vector was cached")
	}
}

// TestCachedSkipsTextReadBeforeAnErasure: text read before its owner's
// erasure (the round's epoch) is never sent to the embedder; another
// user's text of the same call's time is.
func TestCachedSkipsTextReadBeforeAnErasure(t *testing.T) {
	g, calls := newGated(), cache.NewCalls()
	close(g.gate)
	c := NewCached(g, &memCache{}, calls)
	ctx := cache.WithEpoch(context.Background(), cache.Epoch())
	calls.Forget("t", "noor")
	if _, err := c.EmbedOwned(ctx, ownedBy("t", "noor", "I live in Porto."), time.Time{}); !errors.Is(err, cache.ErrErased) {
		t.Errorf("the erased user's embedding: %v, want ErrErased", err)
	}
	if n, _ := g.count("I live in Porto."); n != 0 {
		t.Errorf("the erased user's text read before the erasure reached the embedder %d times", n)
	}
	if _, err := c.EmbedOwned(ctx, ownedBy("t", "omar", "I live in Lyon."), time.Time{}); err != nil {
		t.Errorf("another user's embedding: %v", err)
	}
}
