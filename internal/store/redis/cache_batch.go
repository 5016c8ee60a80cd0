package redis

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// SaveExchanges stores exchanges in the backend in one transaction, then brings the
// cached window of each conversation that changed up to date, once: the
// messages the batch appended are appended (one Redis round trip for all),
// the windows of conversations that had more than appends are reloaded.
// Like SaveExchange, a failed refresh drops the cached window instead of
// failing the save.
func (c *Cache) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	defer telemetry.Span(&ctx, "redis.SaveExchanges")()
	results, err := c.inner.SaveExchanges(ctx, exs)
	if err != nil {
		return nil, err
	}
	// Per conversation, the messages the batch appended, in order, unless
	// one of its saves did more than append.
	stored := make(map[memory.Identity][]memory.Message, len(exs))
	var changed []memory.Identity
	for i, ex := range exs {
		res := results[i]
		if res.Duplicate || res.Dropped {
			continue
		}
		msgs, seen := stored[ex.Identity]
		if !seen {
			changed = append(changed, ex.Identity)
		}
		if appendable(res) && (!seen || msgs != nil) {
			stored[ex.Identity] = append(msgs, res.Stored...)
		} else {
			stored[ex.Identity] = nil
		}
	}
	var appends []memory.Identity
	var appended [][]memory.Message
	var reload []memory.Identity
	for _, id := range changed {
		if msgs := stored[id]; msgs != nil {
			appends, appended = append(appends, id), append(appended, msgs)
		} else {
			reload = append(reload, id)
		}
	}
	if len(appends) > 0 {
		reload = append(reload, c.appendAll(ctx, appends, appended)...)
	}
	if len(reload) > 1 {
		c.refreshAll(ctx, reload)
		return results, nil
	}
	for _, id := range reload {
		c.refresh(ctx, id)
	}
	return results, nil
}

// refreshAll reloads the cached windows of ids in one backend query and
// one Redis round trip, dropping those it could not refresh.
func (c *Cache) refreshAll(ctx context.Context, ids []memory.Identity) {
	wins, err := c.inner.RecentMany(ctx, ids, c.window)
	if err != nil {
		c.dropWindows(ctx, ids, err)
		return
	}
	cmds, err := c.evalAll(ctx, fillScript, len(ids), func(i int) ([]string, []any, error) {
		return c.fillArgs(ids[i], wins[i])
	})
	var failed []memory.Identity
	for i, cmd := range cmds {
		if failedCmd(cmd) {
			failed = append(failed, ids[i])
		}
	}
	if len(failed) > 0 {
		c.dropWindows(ctx, failed, err)
	}
}

// dropWindows drops the cached windows of ids after a failed refresh.
func (c *Cache) dropWindows(ctx context.Context, ids []memory.Identity, cause error) {
	c.logger.Warn("redis: cache refresh after save failed; dropping the cached windows", "conversations", len(ids), "err", cause)
	keys := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, c.listKey(id), c.versionKey(id))
	}
	if derr := c.rdb.Del(ctx, keys...).Err(); derr != nil {
		c.logger.Warn("redis: dropping the cached windows failed", "err", derr)
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
	c.logger.Warn("redis: cache refresh after save failed; dropping the cached window", "tenant", id.Tenant, "err", err)
	if derr := c.rdb.Del(ctx, c.listKey(id), c.versionKey(id)).Err(); derr != nil {
		c.logger.Warn("redis: dropping the cached window failed", "tenant", id.Tenant, "err", derr)
	}
}
