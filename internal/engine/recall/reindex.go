package recall

import (
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Reembedder is what a reindex reads and writes.
type Reembedder interface {
	itemEmbedder
	// ItemsToEmbed returns up to limit items with ID > afterID whose vector
	// was not made by model/dims, in ID order.
	ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error)
}

// Progress reports a reindex's headway: items re-embedded so far and the
// last item ID done.
type Progress func(done int, lastID int64)

// Reindex re-embeds, batch by batch in ID order, every item whose vector
// was not made by emb's model and dimension, and returns how many it
// re-embedded. Each batch is committed before the next is read, so an
// interrupted reindex loses at most one batch of work and a rerun resumes
// where it stopped (done items no longer need embedding). progress, if not
// nil, is called after each batch.
func Reindex(ctx context.Context, store Reembedder, emb Embedder, batch int, progress Progress) (int, error) {
	batch = max(1, batch)
	var after int64
	done := 0
	for {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		items, err := store.ItemsToEmbed(ctx, emb.Model(), emb.Dims(), after, batch)
		if err != nil {
			return done, fmt.Errorf("reindex after item %d: %w", after, err)
		}
		if len(items) == 0 {
			return done, nil
		}
		if err := embedStored(ctx, store, owning(emb), items); err != nil {
			return done, fmt.Errorf("reindex after item %d: %w", after, err)
		}
		done += len(items)
		after = items[len(items)-1].ID
		if progress != nil {
			progress(done, after)
		}
	}
}

// itemEmbedder stores vectors on stored items: a reindex's and a
// backfill's write.
type itemEmbedder interface {
	// EmbedItems stores the vectors of items (with Model and Dims) on the
	// rows that still hold them (by tenant, user, kind, ref, chunk and
	// text), and skips the items no longer stored, so that nothing erased
	// or deleted since the items were read comes back.
	EmbedItems(ctx context.Context, items []memory.Item) error
}

// embedStored embeds items, each for its owner, and stores their vectors,
// with emb's model and dimension, on the rows that still hold them.
func embedStored(ctx context.Context, store itemEmbedder, emb OwnedEmbedder, items []memory.Item) error {
	vecs, err := emb.EmbedOwned(ctx, itemTexts(items), time.Time{})
	if err != nil {
		return fmt.Errorf("embed %d items: %w", len(items), err)
	}
	for i := range items {
		items[i].Embedding, items[i].Model, items[i].Dims = vecs[i], emb.Model(), emb.Dims()
	}
	return store.EmbedItems(ctx, items)
}
