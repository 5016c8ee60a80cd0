// Package redis holds memgate's Redis adapter: a durable capture queue
// on Redis Streams (Queue), beside the PostgreSQL store.
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// Client is a pool of connections to one Redis (go-redis's client), safe
// for concurrent use: one serves every service of this package a process
// opens on that Redis (NewQueue, NewErasures, NewPrints). Whoever opened
// it closes it, once, after the services it serves.
type Client = redis.Client

// NewClient returns a Redis client for url (redis://[:password@]host:port/db
// or rediss:// for TLS). It does not connect until first used. Unless the
// URL says otherwise (dial_timeout=…), dialing gives up after one second and
// one retry, so an unreachable Redis degrades the cache quickly instead of
// stalling requests. Every command ends by its context's deadline: without
// ContextTimeoutEnabled go-redis waits out its own read timeout (3 s, then
// a retry) whatever the caller's deadline, and a Redis that drops packets
// holds a request's memory load, or an erasure, that long.
func NewClient(url string) (*Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: parse url: %w", err)
	}
	opts.ContextTimeoutEnabled = true
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
	// Logger receives what the queue logs (the append-only file rewrites
	// after a purge: aof.go); nil: nothing is logged.
	Logger *slog.Logger
	// Breaker guards the calls a chat request waits for (Queued,
	// EnqueueTurn, Enqueue, EnqueueBatch), shared with the queue's
	// siblings; nil: none.
	Breaker *Breaker
}

// payloadField is the stream entry field that held the payload inline in
// the entries of older builds (see refField).
const payloadField = "p"

// streamVersion ends the key of the stream a Queue writes: the configured
// prefix and name, then this (see Queue).
const streamVersion = ":v2"

// Queue is a durable queue on Redis streams read through one consumer
// group: every entry is delivered to one consumer at a time, stays pending
// until acknowledged, and is redelivered to another consumer when its claimer
// goes quiet for longer than staleAfter. It is safe for concurrent use and
// across processes.
//
// A Queue writes its entries, which hold a reference to a payload key
// (payload.go), to the stream "<prefix><name>:v2" and reads that stream
// and the legacy one, "<prefix><name>", where older builds queue entries
// with their payload inline and from which they consume. So during a
// rolling upgrade no consumer of an older build — which would find no
// payload in a new entry, discard it as undecodable and acknowledge it —
// ever reads an entry of this build, while this build's consumers drain
// what older producers still queue. Each stream has its own group (same
// name) and its own per-conversation counts (turns.go); Queued, Ack,
// Pending and Purge cover both, and Claim takes the oldest entries of the
// two (claim.go). The lease (lease.go) stays the legacy stream's, so a
// consumer of either build holds it alone.
type Queue struct {
	rdb    redis.UniversalClient
	legacy string // prefix + name: the stream of older builds
	stream string // legacy + streamVersion: the stream this build writes
	name   string
	group  string
	maxLen int64
	// aof rewrites Redis's append-only file after a purge (Scrub),
	// shared with the queue's siblings.
	aof *aofRewriter
	// breaker guards the calls a chat request waits for, shared with
	// the queue's siblings (nil: none).
	breaker *Breaker
}

// NewQueue returns a queue on rdb and creates its consumer group (and the
// stream it writes) if they do not exist; creating them again is a no-op.
// It creates nothing on the legacy stream: Claim creates the group there
// if an older build created the stream.
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
	q := newQueue(rdb, cfg.Prefix+cfg.Stream, cfg.Stream, cfg.Group, cfg.MaxLen, newAOFRewriter(rdb, cfg.Prefix+cfg.Stream+":aof-due", cfg.Logger), cfg.Breaker)
	if err := q.createGroup(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// newQueue returns a queue whose legacy stream is legacy.
func newQueue(rdb redis.UniversalClient, legacy, name, group string, maxLen int64, aof *aofRewriter, breaker *Breaker) *Queue {
	return &Queue{rdb: rdb, legacy: legacy, stream: legacy + streamVersion, name: name, group: group, maxLen: maxLen, aof: aof, breaker: breaker}
}

// Scrub asks Redis, in the background, to rewrite its append-only file if
// it keeps one, so that what a purge deleted leaves the disk too
// (record.Scrubber; see aof.go): at once, or an interval after the last
// request of this queue and its siblings. It never blocks, and a Redis
// that refuses is logged and counted, never an error.
func (q *Queue) Scrub() { q.aof.request() }

// Close stops the queue's background work (the append-only file
// rewrites), that of its siblings too; it does not close the client.
func (q *Queue) Close() error {
	q.aof.stop()
	return nil
}

// Collectors are the queue's Prometheus collectors, shared with its
// siblings: memgate_redis_aof_rewrites_total.
func (q *Queue) Collectors() []prometheus.Collector {
	return []prometheus.Collector{q.aof.requests}
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
// round trip (skipped while the breaker is open).
func (q *Queue) Enqueue(ctx context.Context, payload []byte) error {
	if err := q.breaker.doSending(ctx, "enqueue_"+q.name, len(payload), func(ctx context.Context) error { return q.enqueue(ctx, nil, [][]byte{payload}) }); err != nil {
		return fmt.Errorf("redis: enqueue: %w", err)
	}
	return nil
}

// EnqueueBatch appends payloads in order, in one round trip that Redis
// runs as a whole: all of them or none (skipped while the breaker is
// open; a batch of more than tripMaxBytes that times out does not open
// it).
func (q *Queue) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	n := 0
	for _, p := range payloads {
		n += len(p)
	}
	if err := q.breaker.doSending(ctx, "enqueue_"+q.name, n, func(ctx context.Context) error { return q.enqueue(ctx, nil, payloads) }); err != nil {
		return fmt.Errorf("redis: enqueue batch: %w", err)
	}
	return nil
}

// Ack acknowledges entries and deletes them from their streams, so an
// acknowledged entry is never delivered again, and uncounts the turns
// among them queued with EnqueueTurn — in one script, atomically.
func (q *Queue) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	var legacy, own []string
	for _, id := range ids {
		if rest, ok := strings.CutPrefix(id, legacyTag); ok {
			legacy = append(legacy, rest)
		} else {
			own = append(own, id)
		}
	}
	if _, err := q.ack(ctx, legacy, own); err != nil {
		return fmt.Errorf("redis: ack: %w", err)
	}
	return nil
}

// Pending reports how many entries are enqueued or claimed but not
// acknowledged. Because Ack deletes what it acknowledges, that is exactly the
// length of the streams (XLEN), in one round trip: undelivered entries plus
// the group's pending lists. Entries trimmed by MaxLen are gone and no longer
// counted.
func (q *Queue) Pending(ctx context.Context) (int64, error) {
	var legacy, own *redis.IntCmd
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		legacy, own = p.XLen(ctx, q.legacy), p.XLen(ctx, q.stream)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redis: pending: %w", unavailable(err))
	}
	return legacy.Val() + own.Val(), nil
}

// Oldest returns when the oldest entry of the two streams was enqueued
// (the zero time: none): its id's milliseconds. Acknowledged entries are
// deleted from the stream, so the first entry of each is the oldest not
// acknowledged, claimed or not.
func (q *Queue) Oldest(ctx context.Context) (time.Time, error) {
	var firsts [2]*redis.XMessageSliceCmd
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		firsts[0], firsts[1] = p.XRangeN(ctx, q.legacy, "-", "+", 1), p.XRangeN(ctx, q.stream, "-", "+", 1)
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("redis: oldest: %w", unavailable(err))
	}
	var oldest time.Time
	for _, first := range firsts {
		for _, m := range first.Val() {
			ms, _, ok := strings.Cut(m.ID, "-")
			n, err := strconv.ParseInt(ms, 10, 64)
			if !ok || err != nil {
				return time.Time{}, fmt.Errorf("redis: oldest: entry id %q", m.ID)
			}
			if at := time.UnixMilli(n); oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
	}
	return oldest, nil
}

// max1ms rounds a positive duration below a millisecond up to one: Redis
// counts in milliseconds, and 0 means "forever" to BLOCK.
func max1ms(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d
}

// unavailable marks failures to reach Redis with memory.ErrUnavailable;
// command errors Redis itself returned pass through unchanged.
func unavailable(err error) error {
	var rerr redis.Error
	if err == nil || errors.As(err, &rerr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", memory.ErrUnavailable, err)
}
