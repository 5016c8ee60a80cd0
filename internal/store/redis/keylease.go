package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// keyLeaseScript takes or renews a holder's lease on each key.
// KEYS: the leases. ARGV: holder, ttl ms. It returns, per key, 1 when the
// holder holds the lease now (taken: SET NX PX, or renewed: PEXPIRE of
// its own), 0 when another holder has it.
var keyLeaseScript = redis.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i] = 1
  elseif redis.call('GET', k) == ARGV[1] then
    redis.call('PEXPIRE', k, ARGV[2])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
`)

// keyReleaseScript deletes each lease the holder holds (compare and
// delete): a lease that ran out and was taken by another stays theirs.
// KEYS: the leases. ARGV: holder.
var keyReleaseScript = redis.NewScript(`
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then redis.call('DEL', k) end
end
return 0
`)

// Leases are leases on keys (an enrichment queue's conversations), each
// held by one holder at a time across processes: a Redis string per key,
// "<prefix><key>", holding its holder's token, with a TTL. A holder that
// stops renewing (crashed, cut off) loses a lease when its TTL has passed.
type Leases struct {
	rdb    redis.UniversalClient
	prefix string
}

// Leases returns the leases on keys of q's entries (the enrichment
// queue's conversations): "<stream>:lease:<key>", beside the queue's own
// lease ("<stream>:lease"), which they never touch.
func (q *Queue) Leases() *Leases {
	return &Leases{rdb: q.rdb, prefix: q.legacy + ":lease:"}
}

// Lease takes or renews holder's lease on each key for ttl, in one round
// trip, and reports per key whether holder holds it now. holder should be
// unique to the holding process (a token): the lease is renewed and
// released only by the one that holds it.
func (l *Leases) Lease(ctx context.Context, holder string, ttl time.Duration, keys ...string) ([]bool, error) {
	if holder == "" || ttl <= 0 {
		return nil, fmt.Errorf("redis: lease keys: %w: holder %q, ttl %s", memory.ErrInvalid, holder, ttl)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	res, err := keyLeaseScript.Run(ctx, l.rdb, l.keys(keys), holder, max1ms(ttl).Milliseconds()).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("redis: lease keys: %w", unavailable(err))
	}
	if len(res) != len(keys) {
		return nil, fmt.Errorf("redis: lease keys: %d answers for %d keys", len(res), len(keys))
	}
	held := make([]bool, len(keys))
	for i, n := range res {
		held[i] = n == 1
	}
	return held, nil
}

// Release gives up holder's leases on keys, those it holds, so that the
// next holder takes them at once instead of waiting for them to run out.
func (l *Leases) Release(ctx context.Context, holder string, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := keyReleaseScript.Run(ctx, l.rdb, l.keys(keys), holder).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis: release keys: %w", unavailable(err))
	}
	return nil
}

// keys returns the Redis keys of the leases on keys.
func (l *Leases) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = l.prefix + k
	}
	return out
}
