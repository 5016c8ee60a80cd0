package redis

import (
	"context"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// The Cache keeps no knowledge of its own: summaries, facts and recall items
// are read and written by compaction and recall workers, not on the hot path
// of every request the way the recent window is, and every call below goes
// straight to the backend.

// MessagesAfter delegates to the backend.
func (c *Cache) MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error) {
	return c.inner.MessagesAfter(ctx, id, afterSeq, limit)
}

// LatestSummary delegates to the backend.
func (c *Cache) LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	return c.inner.LatestSummary(ctx, id)
}

// SaveSummary delegates to the backend.
func (c *Cache) SaveSummary(ctx context.Context, s memory.Summary) error {
	return c.inner.SaveSummary(ctx, s)
}

// UpsertFact delegates to the backend.
func (c *Cache) UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error) {
	return c.inner.UpsertFact(ctx, f, maxPerUser)
}

// Facts delegates to the backend.
func (c *Cache) Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	return c.inner.Facts(ctx, tenant, user, now, history)
}

// DeleteFact delegates to the backend.
func (c *Cache) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	return c.inner.DeleteFact(ctx, tenant, user, id)
}

// AddItems delegates to the backend.
func (c *Cache) AddItems(ctx context.Context, items []memory.Item) error {
	return c.inner.AddItems(ctx, items)
}

// SearchVector delegates to the backend.
func (c *Cache) SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	return c.inner.SearchVector(ctx, q)
}

// SearchText delegates to the backend.
func (c *Cache) SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	return c.inner.SearchText(ctx, q)
}

// ItemsToEmbed delegates to the backend.
func (c *Cache) ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error) {
	return c.inner.ItemsToEmbed(ctx, model, dims, afterID, limit)
}

// SetEmbeddings delegates to the backend.
func (c *Cache) SetEmbeddings(ctx context.Context, items []memory.Item) error {
	return c.inner.SetEmbeddings(ctx, items)
}

// MessagesAround delegates to the backend, so recalled turns come with the
// turns around them behind the Cache as on the store itself (the backend's
// shared messages, to read and never to write into).
func (c *Cache) MessagesAround(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
	return c.inner.MessagesAround(ctx, tenant, user, refs, radius)
}

// CommonTerms delegates to the backend, so recall leaves a user's most
// common words (speaker names) out of its vector query behind the Cache as
// on the store itself.
func (c *Cache) CommonTerms(ctx context.Context, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	return c.inner.CommonTerms(ctx, tenant, user, terms, minDF, frac)
}
