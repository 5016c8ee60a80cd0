package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// inspectBackend is what the web inspector reads through the Cache: the
// backend's own inspection reads (pgstore implements them).
type inspectBackend interface {
	Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error)
	Branches(ctx context.Context, id memory.Identity) ([]memory.Branch, error)
	Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error)
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
	SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error
	AddSavings(ctx context.Context, bs []memory.SavingsBucket) error
	Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error)
}

// inspector returns the backend's inspection reads, or an error naming the
// backend that lacks them.
func (c *Cache) inspector() (inspectBackend, error) {
	ib, ok := c.inner.(inspectBackend)
	if !ok {
		return nil, fmt.Errorf("redis: backend %T cannot be inspected: %w", c.inner, memory.ErrUnavailable)
	}
	return ib, nil
}

// Users delegates to the backend.
func (c *Cache) Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error) {
	ib, err := c.inspector()
	if err != nil {
		return nil, err
	}
	return ib.Users(ctx, tenant, match, limit)
}

// Branches delegates to the backend.
func (c *Cache) Branches(ctx context.Context, id memory.Identity) ([]memory.Branch, error) {
	ib, err := c.inspector()
	if err != nil {
		return nil, err
	}
	return ib.Branches(ctx, id)
}

// Summaries delegates to the backend.
func (c *Cache) Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error) {
	ib, err := c.inspector()
	if err != nil {
		return nil, err
	}
	return ib.Summaries(ctx, id)
}

// Footprint counts the backend's rows of the user and the conversation
// windows of theirs this cache holds.
func (c *Cache) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	ib, err := c.inspector()
	if err != nil {
		return memory.Footprint{}, err
	}
	f, err := ib.Footprint(ctx, tenant, user)
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

// SetFactPinned delegates to the backend (facts are not cached).
func (c *Cache) SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error {
	ib, err := c.inspector()
	if err != nil {
		return err
	}
	return ib.SetFactPinned(ctx, tenant, user, id, pinned)
}

// AddSavings delegates to the backend.
func (c *Cache) AddSavings(ctx context.Context, bs []memory.SavingsBucket) error {
	ib, err := c.inspector()
	if err != nil {
		return err
	}
	return ib.AddSavings(ctx, bs)
}

// Savings delegates to the backend.
func (c *Cache) Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error) {
	ib, err := c.inspector()
	if err != nil {
		return nil, err
	}
	return ib.Savings(ctx, tenant, since)
}
