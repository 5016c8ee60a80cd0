package engine

import (
	"log/slog"
	"testing"

	"github.com/memgate/memgate/internal/engine/recall"
)

// TestNewEmbedderKeepsOwnersApart: the embedder behind a cache embeds on
// each owner's behalf (recall.OwnedEmbedder), so that the searcher,
// recaller and indexer keep one user's cached vectors from another's; a
// wrapper hiding that would share the cache between tenants.
func TestNewEmbedderKeepsOwnersApart(t *testing.T) {
	emb, _, err := NewEmbedder(EmbedderOptions{Provider: "openai", Model: "m", Dims: 8, Batch: 1},
		recall.NewEmbeddingCache(1<<20), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := emb.(recall.OwnedEmbedder); !ok {
		t.Fatalf("NewEmbedder with a cache = %T, not a recall.OwnedEmbedder", emb)
	}
}
