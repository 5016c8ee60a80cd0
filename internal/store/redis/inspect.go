package redis

import (
	"context"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// Footprint counts the backend's rows of the user and the conversation
// windows of theirs this cache holds.
func (c *Cache) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	f, err := c.inner.Footprint(ctx, tenant, user)
	if err != nil {
		return f, err
	}
	lists, err := c.rdb.SMembers(ctx, c.userKey(tenant, user)).Result()
	if err != nil {
		return f, fmt.Errorf("redis: list cached windows: %w", unavailable(err))
	}
	for _, l := range lists {
		n, err := c.rdb.Exists(ctx, l).Result()
		if err != nil {
			return f, fmt.Errorf("redis: count cached windows: %w", unavailable(err))
		}
		f.CachedWindows += int(n)
	}
	return f, nil
}
