// Package redis holds memgate's Redis adapter: a durable capture queue
// on Redis Streams (Queue), beside the PostgreSQL store.
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

// NewClient returns a Redis client for url (redis://[:password@]host:port/db
// or rediss:// for TLS). It does not connect until first used. Unless the
// URL says otherwise (dial_timeout=…), dialing gives up after one second and
// one retry, so an unreachable Redis degrades the cache quickly instead of
// stalling requests.
func NewClient(url string) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: parse url: %w", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = time.Second
	}
	if opts.DialerRetries == 0 {
		opts.DialerRetries = 1
	}
	return redis.NewClient(opts), nil
}

// QueueConfig names a queue's stream and consumer group.
type QueueConfig struct {
	// Prefix is prepended to the stream key (e.g. "memgate:").
	Prefix string
	// Stream is the stream's name after Prefix; default "capture".
	Stream string
	// Group is the consumer group every worker joins; default "workers".
	Group string
	// MaxLen caps the stream approximately (XADD MAXLEN ~); 0, the default,
	// means no cap. A cap trims the oldest entries even if they were never
	// processed, so set it only as a guard against unbounded growth.
	MaxLen int64
}

// payloadField is the stream entry field that held the payload inline in
// the entries of older builds (see refField).
const payloadField = "p"

// Queue is a durable queue on one Redis stream read through one consumer
// group: every entry is delivered to one consumer at a time, stays pending
// until acknowledged, and is redelivered to another consumer when its claimer
// goes quiet for longer than staleAfter. It is safe for concurrent use and
// across processes.
type Queue struct {
	rdb    redis.UniversalClient
	stream string // prefix + name
	name   string
	group  string
	maxLen int64
}

// NewQueue returns a queue on rdb and creates its consumer group (and the
// stream) if they do not exist; creating them again is a no-op.
func NewQueue(ctx context.Context, rdb redis.UniversalClient, cfg QueueConfig) (*Queue, error) {
	if cfg.Stream == "" {
		cfg.Stream = "capture"
	}
	if cfg.Group == "" {
		cfg.Group = "workers"
	}
	if cfg.MaxLen < 0 {
		return nil, fmt.Errorf("redis: %w: negative MaxLen %d", memory.ErrInvalid, cfg.MaxLen)
	}
	q := &Queue{rdb: rdb, stream: cfg.Prefix + cfg.Stream, name: cfg.Stream, group: cfg.Group, maxLen: cfg.MaxLen}
	if err := q.createGroup(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// createGroup creates the consumer group at the start of the stream,
// creating the stream too; an existing group is left as it is.
func (q *Queue) createGroup(ctx context.Context) error {
	err := q.rdb.XGroupCreateMkStream(ctx, q.stream, q.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("redis: create group %s on %s: %w", q.group, q.stream, unavailable(err))
	}
	return nil
}

// Enqueue appends payload to the stream, with its payload key, in one
// round trip.
func (q *Queue) Enqueue(ctx context.Context, payload []byte) error {
	if err := q.enqueue(ctx, nil, [][]byte{payload}); err != nil {
		return fmt.Errorf("redis: enqueue: %w", err)
	}
	return nil
}

// EnqueueBatch appends payloads in order, in one round trip that Redis
// runs as a whole: all of them or none.
func (q *Queue) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	if err := q.enqueue(ctx, nil, payloads); err != nil {
		return fmt.Errorf("redis: enqueue batch: %w", err)
	}
	return nil
}

// Claim returns up to max deliveries for consumer. First it takes over
// entries that have been pending, unacknowledged, for at least staleAfter
// (XAUTOCLAIM: a crashed worker's batch is redone), then reads new entries
// (XREADGROUP >), waiting up to block when there are none. Attempts is the
// entry's delivery count in the group, this delivery included. The
// payloads are read in one more round trip, with the delivery counts of
// the stale entries. An entry whose payload key is gone (Purge deleted it
// after the entry was read, or it was lost) is dropped: acknowledged and
// deleted, not delivered.
func (q *Queue) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	if max <= 0 {
		return nil, nil
	}
	stale, err := q.claimStale(ctx, consumer, max, staleAfter)
	if err != nil {
		return nil, err
	}
	var fresh []redis.XMessage
	if len(stale) < max {
		if len(stale) > 0 {
			block = 0 // top up with new entries, but do not wait for them
		}
		fresh, err = q.readNew(ctx, consumer, max-len(stale), block)
		if errors.Is(err, errNoGroup) {
			// The group vanished (Redis restarted without persistence): recreate it.
			if err := q.createGroup(ctx); err != nil {
				return nil, err
			}
			fresh, err = q.readNew(ctx, consumer, max-len(stale), block)
		}
		if err != nil {
			return nil, err
		}
	}
	return q.deliveries(ctx, consumer, stale, fresh)
}

// errNoGroup reports that the stream or consumer group does not exist.
var errNoGroup = errors.New("no such consumer group")

// claimStale moves entries idle for staleAfter (0: all of them) to
// consumer and returns them.
func (q *Queue) claimStale(ctx context.Context, consumer string, max int, staleAfter time.Duration) ([]redis.XMessage, error) {
	var msgs []redis.XMessage
	start := "0-0"
	minIdle := staleAfter // 0: every pending entry
	if minIdle < 0 {
		minIdle = 0
	}
	// XAUTOCLAIM scans a bounded part of the pending list per call; a few
	// rounds reach far enough without holding Redis for long.
	for range 4 {
		got, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: q.stream, Group: q.group, Consumer: consumer,
			MinIdle: minIdle, Start: start, Count: int64(max - len(msgs)),
		}).Result()
		if err != nil {
			if isNoGroup(err) {
				return nil, nil // Claim's read recreates the group
			}
			return nil, fmt.Errorf("redis: autoclaim: %w", unavailable(err))
		}
		msgs = append(msgs, got...)
		if next == "0-0" || len(msgs) >= max {
			break
		}
		start = next
	}
	return msgs, nil
}

// deliveries turns the entries Claim took over (stale) and read (fresh)
// into deliveries, in that order, reading in one pipeline the delivery
// counts of the stale ones (one XPENDING per id) and every payload kept
// in a key (one MGET). It drops the entries whose payload key is gone.
func (q *Queue) deliveries(ctx context.Context, consumer string, stale, fresh []redis.XMessage) ([]memory.Delivery, error) {
	msgs := append(stale[:len(stale):len(stale)], fresh...)
	if len(msgs) == 0 {
		return nil, nil
	}
	keys, at := q.payloadRefs(msgs)
	pending := make([]*redis.XPendingExtCmd, len(stale))
	var mget *redis.SliceCmd
	if len(stale) > 0 || len(keys) > 0 {
		_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, m := range stale {
				pending[i] = p.XPendingExt(ctx, &redis.XPendingExtArgs{
					Stream: q.stream, Group: q.group, Start: m.ID, End: m.ID, Count: 1, Consumer: consumer,
				})
			}
			if len(keys) > 0 {
				mget = p.MGet(ctx, keys...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redis: claim: read payloads: %w", unavailable(err))
		}
	}
	counts := make(map[string]int, len(stale))
	for _, c := range pending {
		for _, p := range c.Val() {
			counts[p.ID] = int(p.RetryCount)
		}
	}
	var vals []any
	if mget != nil {
		vals = mget.Val()
	}
	out := make([]memory.Delivery, 0, len(msgs))
	var lost []string
	for i, e := range resolve(msgs, at, vals) {
		if e.lost {
			lost = append(lost, e.msg.ID)
			continue
		}
		d := memory.Delivery{ID: e.msg.ID, Payload: e.payload, Attempts: 1} // 1: first delivery of a new entry
		if n, ok := counts[e.msg.ID]; ok && i < len(stale) {
			d.Attempts = n
		}
		out = append(out, d)
	}
	if len(lost) > 0 {
		if err := q.Ack(ctx, lost...); err != nil {
			return nil, fmt.Errorf("redis: claim: drop entries without payload: %w", err)
		}
	}
	return out, nil
}

// readNew reads entries never delivered to the group.
func (q *Queue) readNew(ctx context.Context, consumer string, max int, block time.Duration) ([]redis.XMessage, error) {
	args := &redis.XReadGroupArgs{
		Group: q.group, Consumer: consumer, Streams: []string{q.stream, ">"},
		Count: int64(max), Block: -1, // -1: do not block (BLOCK 0 would wait forever)
	}
	if block > 0 {
		args.Block = max1ms(block)
	}
	streams, err := q.rdb.XReadGroup(ctx, args).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case isNoGroup(err):
		return nil, errNoGroup
	case err != nil:
		return nil, fmt.Errorf("redis: read group: %w", unavailable(err))
	}
	var out []redis.XMessage
	for _, s := range streams {
		out = append(out, s.Messages...)
	}
	return out, nil
}

// Ack acknowledges entries and deletes them from the stream, so an
// acknowledged entry is never delivered again, and uncounts the turns
// among them queued with EnqueueTurn — in one script, atomically.
func (q *Queue) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, q.group)
	for _, id := range ids {
		args = append(args, id)
	}
	if err := ackScript.Run(ctx, q.rdb, []string{q.stream, q.queuedKey()}, args...).Err(); err != nil {
		return fmt.Errorf("redis: ack: %w", unavailable(err))
	}
	return nil
}

// Pending reports how many entries are enqueued or claimed but not
// acknowledged. Because Ack deletes what it acknowledges, that is exactly the
// stream's length (XLEN): undelivered entries plus the group's pending list.
// Entries trimmed by MaxLen are gone and no longer counted.
func (q *Queue) Pending(ctx context.Context) (int64, error) {
	n, err := q.rdb.XLen(ctx, q.stream).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: pending: %w", unavailable(err))
	}
	return n, nil
}

// max1ms rounds a positive duration below a millisecond up to one: Redis
// counts in milliseconds, and 0 means "forever" to BLOCK.
func max1ms(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d
}

// isNoGroup reports Redis's NOGROUP error.
func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// unavailable marks failures to reach Redis with memory.ErrUnavailable;
// command errors Redis itself returned pass through unchanged.
func unavailable(err error) error {
	var rerr redis.Error
	if err == nil || errors.As(err, &rerr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", memory.ErrUnavailable, err)
}
