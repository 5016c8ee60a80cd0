package redis

import (
	"context"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// adopter is what Adopt and RecordCandidate need of the backend.
type adopter interface {
	RecordCandidate(ctx context.Context, id memory.Identity, exchangeID, candidate string) error
	Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error)
	Continued(ctx context.Context, ex memory.Exchange) (bool, error)
}

// RecordCandidate records the exchange's candidate conversation in the
// backend (see capture.Adopter); a backend that cannot is an error.
func (c *Cache) RecordCandidate(ctx context.Context, id memory.Identity, exchangeID, candidate string) error {
	a, ok := c.inner.(adopter)
	if !ok {
		return fmt.Errorf("redis: %w: the backend does not record candidate conversations", memory.ErrInvalid)
	}
	return a.RecordCandidate(ctx, id, exchangeID, candidate)
}

// Adopt moves a chat's first turns from the user's default conversation
// into to in the backend (see capture.Adopter), then drops the cached
// windows of both conversations, so neither is read from the cache as it
// was before the move.
func (c *Cache) Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error) {
	a, ok := c.inner.(adopter)
	if !ok {
		return 0, nil
	}
	n, err := a.Adopt(ctx, to, prior)
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

// Continued asks the backend (see capture.Adopter).
func (c *Cache) Continued(ctx context.Context, ex memory.Exchange) (bool, error) {
	a, ok := c.inner.(adopter)
	if !ok {
		return false, nil
	}
	return a.Continued(ctx, ex)
}
