package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

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
	var changed []memory.Identity
	for i, ex := range exs {
		if results[i].Duplicate || results[i].Dropped || seen[ex.Identity] {
			continue
		}
		seen[ex.Identity] = true
		changed = append(changed, ex.Identity)
	}
	if rm, ok := c.inner.(recentManyer); ok && len(changed) > 1 {
		c.refreshAll(ctx, rm, changed)
		return results, nil
	}
	for _, id := range changed {
		c.refresh(ctx, id)
	}
	return results, nil
}

// recentManyer is a backend that reads the windows of several
// conversations in one query.
type recentManyer interface {
	RecentMany(ctx context.Context, ids []memory.Identity, n int) ([][]memory.Message, error)
}

// refreshAll reloads the cached windows of ids in one backend query and
// one Redis round trip, dropping those it could not refresh.
func (c *Cache) refreshAll(ctx context.Context, rm recentManyer, ids []memory.Identity) {
	wins, err := rm.RecentMany(ctx, ids, c.window)
	if err != nil {
		c.dropWindows(ctx, ids, err)
		return
	}
	run := func(eval func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd) ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, len(ids))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				keys, args, err := c.fillArgs(id, wins[i])
				if err != nil {
					return err
				}
				cmds[i] = eval(p, keys, args)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := run(func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return fillScript.EvalSha(ctx, p, keys, args...)
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis lost its scripts (a restart): send the script itself.
		cmds, err = run(func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
			return fillScript.Eval(ctx, p, keys, args...)
		})
	}
	var failed []memory.Identity
	for i, cmd := range cmds {
		if cmd == nil || cmd.Err() != nil && !errors.Is(cmd.Err(), redis.Nil) {
			failed = append(failed, ids[i])
		}
	}
	if len(failed) > 0 {
		if err == nil {
			err = errors.New("fill failed")
		}
		c.dropWindows(ctx, failed, err)
	}
}

// dropWindows drops the cached windows of ids after a failed refresh.
func (c *Cache) dropWindows(ctx context.Context, ids []memory.Identity, cause error) {
	c.logger.Warn("redisstore: cache refresh after save failed; dropping the cached windows", "conversations", len(ids), "err", cause)
	keys := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, c.listKey(id), c.versionKey(id))
	}
	if derr := c.rdb.Del(ctx, keys...).Err(); derr != nil {
		c.logger.Warn("redisstore: dropping the cached windows failed", "err", derr)
	}
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
