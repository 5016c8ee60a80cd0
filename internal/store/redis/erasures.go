package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Erasure notices: an erasure reaches the store, which every process
// shares, and the caches of the process that serves it. What other
// processes keep of the erased user that no revision guards (recall's
// vectors, the fact extraction model's answers) they drop on the notice
// the erasing process publishes on a Redis channel, "<prefix>erasures",
// that every process subscribes to (Erasures). An erasure queues its
// notice (Publish) and does not wait for Redis: Send publishes the
// queued notices, retrying each until Redis takes it (erasures_send.go).
// Pub/sub keeps no message for a subscriber that is not connected: on
// each (re)subscription, and on each error receiving, a process drops
// everything it keeps of anyone (Forgetter.Clear), for what it may have
// missed. Where no notice arrives at all (no Redis, or a notice given up
// at shutdown), the caches' age bound (cache.UnrevisedMaxAge) does.

// Forgetter is what an erasure notice reaches: the caches of one process.
type Forgetter interface {
	// Forget drops what is kept of the user of tenant.
	Forget(tenant, user string)
	// Clear drops what is kept of everyone.
	Clear()
}

// publishTimeout bounds one attempt to publish an erasure notice, unless
// Erasures.PublishTimeout says otherwise (the client ends a command by its
// context's deadline: NewClient).
const publishTimeout = 2 * time.Second

// pingAfter is how long Run waits for a notice before it pings.
const pingAfter = 30 * time.Second

// resubscribeWait is how long Run waits after an error receiving before
// it receives again (reconnecting).
const resubscribeWait = time.Second

// Erasures publishes and receives erasure notices over one Redis client.
// It is safe for concurrent use.
type Erasures struct {
	rdb       *redis.Client
	channel   string
	logger    *slog.Logger
	pingAfter time.Duration // silence before a ping, and a ping's wait
	retry     backoff       // Send's pacing of the attempts that fail

	// PublishTimeout bounds one attempt to publish a notice, and Send's
	// last flush; 0 means publishTimeout. Set it before Send starts.
	PublishTimeout time.Duration

	outbox            // the notices Publish queued that Send has not published
	published, failed prometheus.Counter
	waiting           prometheus.GaugeFunc
}

// notice is an erasure notice's payload: the user erased (or one of whose
// conversations was deleted).
type notice struct {
	Tenant string `json:"tenant"`
	User   string `json:"user"`
}

// everyonePayload is the notice that tells every process to forget
// everyone (outbox overflowed). It is not JSON: a process of an older
// build takes it for a malformed notice, on which it forgets everyone too.
const everyonePayload = "*"

// NewErasures returns the erasure notices of the deployment whose Redis
// keys start with prefix (e.g. "memgate:").
func NewErasures(rdb *redis.Client, prefix string, logger *slog.Logger) *Erasures {
	e := &Erasures{rdb: rdb, channel: prefix + "erasures", logger: logger, pingAfter: pingAfter,
		retry: backoff{first: 250 * time.Millisecond, max: 5 * time.Second}, outbox: newOutbox(maxPendingNotices)}
	e.published = prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_erasure_notices_published_total",
		Help: "Erasure notices published to the other processes (Redis took them)."})
	e.failed = prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_erasure_notices_failed_total",
		Help: "Attempts to publish an erasure notice that failed (Redis unreachable); each is tried again."})
	e.waiting = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "memgate_erasure_notices_pending",
		Help: "Erasure notices queued or being published, not yet taken by Redis."},
		func() float64 { return float64(e.pending()) })
	return e
}

// publishWait is how long one attempt to publish may take.
func (e *Erasures) publishWait() time.Duration {
	if e.PublishTimeout > 0 {
		return e.PublishTimeout
	}
	return publishTimeout
}

// Channel is the channel the notices go over.
func (e *Erasures) Channel() string { return e.channel }

// Collectors returns the notices' published and failed counts and how
// many are pending.
func (e *Erasures) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.published, e.failed, e.waiting}
}

// Run subscribes to the notices and makes f forget each one's user until
// ctx ends. f is cleared on each (re)subscription, notices published
// while this process was not subscribed being lost. A connection silent
// for pingAfter is pinged, and one that does not answer by the next
// pingAfter is taken for dead (a half-open connection, whose writes still
// succeed) and replaced: a notice lost to a dead subscription is made up
// within two pingAfter by the Clear of the next. A notice to forget
// everyone (the sender's outbox overflowed) clears f too.
func (e *Erasures) Run(ctx context.Context, f Forgetter) {
	for {
		subscribed, err := e.session(ctx, f)
		if ctx.Err() != nil {
			return
		}
		// A subscription that worked and broke is said once; attempts
		// while Redis stays unreachable are not.
		level := slog.LevelDebug
		if subscribed {
			level = slog.LevelWarn
		}
		e.logger.Log(ctx, level, "redis: erasure notices interrupted; subscribing again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(resubscribeWait):
		}
	}
}

// session is one subscription of Run: it returns when ctx ends or the
// subscription fails or stops answering, saying whether it was
// subscribed.
func (e *Erasures) session(ctx context.Context, f Forgetter) (subscribed bool, err error) {
	ps := e.rdb.Subscribe(ctx, e.channel)
	// A read blocked on the connection does not see ctx end: closing
	// the subscription ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, e.pingAfter)
		if ctx.Err() != nil {
			return subscribed, ctx.Err()
		}
		if err != nil {
			netErr, ok := errors.AsType[net.Error](err)
			switch {
			case !ok || !netErr.Timeout():
				return subscribed, fmt.Errorf("receive: %w", err)
			case pinged:
				return subscribed, errors.New("no answer to a ping")
			}
			if err := ps.Ping(ctx); err != nil {
				return subscribed, fmt.Errorf("ping: %w", err)
			}
			pinged = true
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				subscribed = true
				f.Clear() // notices published before it were missed
			}
		case *redis.Message:
			if m.Payload == everyonePayload {
				f.Clear()
				continue
			}
			var n notice
			if err := json.Unmarshal([]byte(m.Payload), &n); err != nil {
				e.logger.Warn("redis: malformed erasure notice; forgetting everyone", "err", err)
				f.Clear()
				continue
			}
			f.Forget(n.Tenant, n.User)
		}
	}
}
