package redis

import (
	"context"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// Adopt moves a chat's first turns from the user's default conversation
// into to in the backend (see record.Adopter), then drops the cached
// windows of both conversations, so neither is read from the cache as it
// was before the move.
func (c *Cache) Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error) {
	n, err := c.inner.Adopt(ctx, to, prior)
	if err != nil || n == 0 {
		return n, err
	}
	from := to
	from.Conversation = memory.DefaultConversation
	if err := c.rdb.Del(ctx, c.listKey(from), c.versionKey(from), c.listKey(to), c.versionKey(to)).Err(); err != nil {
		c.logger.Warn("redis: dropping the cached windows after a move failed", "tenant", to.Tenant, "err", err)
		return n, fmt.Errorf("redis: clear cached windows after a move: %w: %w", memory.ErrUnavailable, err)
	}
	return n, nil
}
