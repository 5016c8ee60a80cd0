package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// pruneScript removes a group's consumers that have no pending entries
// and have been idle for at least min idle ms, on each stream; a stream
// or group that does not exist is skipped. KEYS: streams. ARGV: group,
// min idle ms. It returns how many consumers it removed. One script: no
// consumer takes an entry between the check and the removal (XGROUP
// DELCONSUMER drops a consumer's pending entries with it).
var pruneScript = redis.NewScript(`
local removed = 0
for _, s in ipairs(KEYS) do
  local cs = redis.pcall('XINFO', 'CONSUMERS', s, ARGV[1])
  if type(cs) == 'table' and not cs.err then
    for _, c in ipairs(cs) do
      local f = {}
      for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
      if f['pending'] == 0 and tonumber(f['idle']) >= tonumber(ARGV[2]) then
        redis.call('XGROUP', 'DELCONSUMER', s, ARGV[1], f['name'])
        removed = removed + 1
      end
    end
  end
end
return removed
`)

// PruneConsumers removes the consumers of the queue's group, on both
// streams (see Queue), that hold no pending entry and have not read for
// at least idle: each process run joins under a name of its own
// (record.ProcessConsumer), so the names of stopped runs would pile up in
// the group. A consumer with pending entries is never removed; one that
// reads again later is recreated by its read. It returns how many it
// removed.
func (q *Queue) PruneConsumers(ctx context.Context, idle time.Duration) (int, error) {
	n, err := pruneScript.Run(ctx, q.rdb, []string{q.legacy, q.stream}, q.group, max(idle, 0).Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("redis: prune consumers: %w", unavailable(err))
	}
	return n, nil
}
