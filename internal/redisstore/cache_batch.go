package redisstore

import (
	"context"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// batchSaver is a backend that stores several exchanges in one transaction.
type batchSaver interface {
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
}

// deadLetterer is a backend that sets refused exchanges aside.
type deadLetterer interface {
	DeadLetter(ctx context.Context, d memory.DeadLetter) error
}

// SaveExchanges stores exchanges in the backend in one transaction when it
// can (else one by one, stopping at the first error), then refreshes the
// cached window of each conversation that changed, once. Like SaveExchange,
// a failed refresh drops the cached window instead of failing the save.
func (c *Cache) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	var results []memory.SaveResult
	if bs, ok := c.inner.(batchSaver); ok {
		var err error
		if results, err = bs.SaveExchanges(ctx, exs); err != nil {
			return nil, err
		}
	} else {
		results = make([]memory.SaveResult, len(exs))
		for i, ex := range exs {
			res, err := c.inner.SaveExchange(ctx, ex)
			if err != nil {
				return nil, err
			}
			results[i] = res
		}
	}
	seen := make(map[memory.Identity]bool, len(exs))
	for i, ex := range exs {
		if results[i].Duplicate || results[i].Dropped || seen[ex.Identity] {
			continue
		}
		seen[ex.Identity] = true
		c.refresh(ctx, ex.Identity)
	}
	return results, nil
}

// refresh reloads a conversation's cached window from the backend, or drops
// it when that fails.
func (c *Cache) refresh(ctx context.Context, id memory.Identity) {
	msgs, err := c.inner.Recent(ctx, id, c.window)
	if err == nil {
		err = c.fill(ctx, id, msgs)
	}
	if err == nil {
		return
	}
	c.logger.Warn("redisstore: cache refresh after save failed; dropping the cached window", "tenant", id.Tenant, "err", err)
	if derr := c.rdb.Del(ctx, c.listKey(id), c.versionKey(id)).Err(); derr != nil {
		c.logger.Warn("redisstore: dropping the cached window failed", "tenant", id.Tenant, "err", derr)
	}
}

// DeadLetter sets a refused exchange aside in the backend. It fails with
// memory.ErrInvalid when the backend keeps no dead letters.
func (c *Cache) DeadLetter(ctx context.Context, d memory.DeadLetter) error {
	dl, ok := c.inner.(deadLetterer)
	if !ok {
		return fmt.Errorf("redisstore: %w: the backend keeps no dead letters", memory.ErrInvalid)
	}
	return dl.DeadLetter(ctx, d)
}
