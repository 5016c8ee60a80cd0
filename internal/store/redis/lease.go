package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// leaseScript takes or renews a lease. KEYS: lease. ARGV: holder, ttl ms.
// It returns 1 when the holder renewed its lease, 2 when it just took it,
// 0 when another holder has it.
var leaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2
`)

// releaseScript gives a lease up. KEYS: lease. ARGV: holder.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
`)

// leaseKey is the lease's key, next to the legacy stream: older builds
// take the same lease, so a consumer of either build drains the queue
// alone.
func (q *Queue) leaseKey() string { return q.legacy + ":lease" }

// Release gives consumer's lease up, if consumer holds it, so that the
// next consumer takes it at once instead of waiting for it to run out.
func (q *Queue) Release(ctx context.Context, consumer string) error {
	if err := releaseScript.Run(ctx, q.rdb, []string{q.leaseKey()}, consumer).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis: release lease: %w", unavailable(err))
	}
	return nil
}

// Lease makes consumer the queue's only consumer for ttl, or renews its
// lease. held reports whether consumer holds the lease now; taken, that it
// has just taken it over (from nobody, or from a holder whose lease ran
// out). A queue whose order matters — a conversation's turns must be stored
// in the order they were sent — is drained by the lease holder alone, so two
// workers never split a backlog between them. The lease is a Redis key next
// to the stream.
func (q *Queue) Lease(ctx context.Context, consumer string, ttl time.Duration) (held, taken bool, err error) {
	if consumer == "" || ttl <= 0 {
		return false, false, fmt.Errorf("redis: lease: %w: consumer %q, ttl %s", memory.ErrInvalid, consumer, ttl)
	}
	n, err := leaseScript.Run(ctx, q.rdb, []string{q.leaseKey()}, consumer, max1ms(ttl).Milliseconds()).Int()
	if err != nil {
		return false, false, fmt.Errorf("redis: lease: %w", unavailable(err))
	}
	return n > 0, n == 2, nil
}

// Unguarded returns q without its breaker: the same stream, its calls
// made however the breaker stands, bounded by their callers alone. It is
// the queue of a caller that waits on no chat (the capture worker's
// enrichment enqueue, which acknowledges the capture entries it queued:
// a skip there would lose their enrichment).
func (q *Queue) Unguarded() *Queue {
	u := *q
	u.breaker = nil
	return &u
}

// Sibling returns a queue on another stream next to q's (same client,
// prefix, group and MaxLen, the append-only file rewrites of Scrub and the
// breaker),
// creating its group: the enrichment stream beside the capture stream.
func (q *Queue) Sibling(ctx context.Context, stream string) (*Queue, error) {
	base := strings.TrimSuffix(q.legacy, q.name)
	s := newQueue(q.rdb, base+stream, stream, q.group, q.maxLen, q.aof, q.breaker)
	if err := s.createGroup(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
