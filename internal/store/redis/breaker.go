package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// ErrBreakerOpen is the error of a request-path call the Breaker skipped:
// Redis ran out of time on an earlier one and has not answered a probe
// since. It is a memory.ErrUnavailable, not a timeout: the call itself
// waited for nothing, so a caller handles it as Redis being away for this
// call only (the Capturer's enrichment enqueue loses that batch's
// enrichment, counted, and sets nothing aside for longer than the
// breaker stays open).
var ErrBreakerOpen = fmt.Errorf("%w: redis breaker open (a call timed out; skipped until redis answers a probe)", memory.ErrUnavailable)

// probeEvery is how often an open Breaker pings Redis, how long each ping
// may take, and how long a guarded call may: the longest a Redis
// answering again is still skipped. It is the capture's wait between two
// queued-turn checks that failed, so the breaker widens no window in
// which a turn another gateway queued goes unseen.
const probeEvery = time.Second

// tripMaxBytes is the most a guarded call may send and still open the
// breaker when it runs out of its time: a call that sends less and waits
// probeEvery stands for a Redis that stopped answering, while a larger
// one (an enrichment or capture enqueue of a big batch) may only be slow
// to send; it is bounded as any other, its timeout counted, and the
// breaker left as it is (the next small call opens it if Redis hangs).
const tripMaxBytes = 64 << 10

// Breaker guards the Redis calls a chat request waits for (the queued-turn
// check and the capture and enrichment enqueues of Queue, Prints,
// Resenders) so that a Redis that hangs holds up at most one of them, for
// at most probeEvery (each guarded call's bound, within its caller's):
// once a call sending at most tripMaxBytes has waited probeEvery and ended
// by running out of its time (its
// deadline, a dial or pool that timed out) — Redis left it unanswered for
// a second — the breaker opens and every guarded call fails at once with
// ErrBreakerOpen, until a background probe (a PING every probeEvery, each
// bounded by it) sees Redis answer; then it closes. A call that fails
// otherwise (Redis refusing a command, a connection refused, which fails
// fast anyway), or that runs out of a shorter bound (a prints read within
// memory.load_timeout: Redis may only be slow), leaves it as it is; a
// guarded call returns by its context's end in any case. Calls of the
// background (the worker's claims and acknowledgements, leases, erasure
// notices and purges, the erasures' deletions of prints and resenders)
// are not guarded: they wait on no chat. A nil *Breaker guards nothing. One
// Breaker serves every guarded service of a process's client: it is safe
// for concurrent use.
type Breaker struct {
	rdb    pinger
	every  time.Duration
	logger *slog.Logger

	open atomic.Bool
	// mu guards probing and closed: one probe runs while open, none
	// after Close.
	mu      sync.Mutex
	probing bool
	closed  bool
	stop    chan struct{}
	probes  sync.WaitGroup

	calls *prometheus.CounterVec
	trips prometheus.Counter
	gauge prometheus.GaugeFunc
}

// NewBreaker returns a closed breaker whose probe pings rdb; logger
// receives its openings and closings.
func NewBreaker(rdb redis.UniversalClient, logger *slog.Logger) *Breaker {
	return newBreaker(rdb, probeEvery, logger)
}

// pinger is what the probe asks whether Redis answers.
type pinger interface {
	Ping(ctx context.Context) *redis.StatusCmd
}

// newBreaker is NewBreaker probing rdb every every.
func newBreaker(rdb pinger, every time.Duration, logger *slog.Logger) *Breaker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Breaker{rdb: rdb, every: every, logger: logger, stop: make(chan struct{})}
	b.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memgate_redis_calls_total",
		Help: "Redis calls a chat request waits for (call: queued_check, enqueue_turn, enqueue_<stream>, prints_read, prints_write, newchat_read, newchat_write), by outcome: ok, error, timeout (ran out of its time: opens the breaker), skipped (the breaker was open)."},
		[]string{"call", "outcome"})
	b.trips = prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_redis_breaker_trips_total",
		Help: "Times the Redis breaker opened: a request-path Redis call ran out of its time."})
	b.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "memgate_redis_breaker_open",
		Help: "1 while the Redis breaker is open: request-path Redis calls are skipped until a probe sees Redis answer."},
		func() float64 {
			if b.open.Load() {
				return 1
			}
			return 0
		})
	return b
}

// Collectors returns the breaker's metrics.
func (b *Breaker) Collectors() []prometheus.Collector {
	if b == nil {
		return nil
	}
	return []prometheus.Collector{b.calls, b.trips, b.gauge}
}

// Open reports whether the breaker is open (guarded calls are skipped).
func (b *Breaker) Open() bool { return b != nil && b.open.Load() }

// do runs fn, the guarded call named call, within b.every (and ctx),
// unless the breaker is open: then it returns ErrBreakerOpen at once. It
// returns by that bound even when fn does not (go-redis may go on dialing
// a Redis that accepts connections and answers nothing past its caller's
// deadline); fn's outcome is counted when it comes, and a call that
// waited b.every and ran out of its time opens the breaker then.
func (b *Breaker) do(ctx context.Context, call string, fn func(context.Context) error) error {
	return b.doSending(ctx, call, 0, fn)
}

// doSending is do for a call that sends Redis n bytes: one that sends
// more than tripMaxBytes opens no breaker by running out of its time.
func (b *Breaker) doSending(ctx context.Context, call string, n int, fn func(context.Context) error) error {
	if b == nil {
		return fn(ctx)
	}
	if b.open.Load() {
		b.calls.WithLabelValues(call, "skipped").Inc()
		return ErrBreakerOpen
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.every)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		err := fn(ctx)
		b.settle(call, start, n <= tripMaxBytes, err)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return fmt.Errorf("redis: %s not answered: %w", call, ctx.Err())
		}
	}
}

// settle counts the outcome of the call named call, begun at start, and
// opens the breaker when it may trip it and it waited b.every and ran
// out of its time.
func (b *Breaker) settle(call string, start time.Time, trips bool, err error) {
	switch {
	case err == nil:
		b.calls.WithLabelValues(call, "ok").Inc()
	case timedOut(err):
		b.calls.WithLabelValues(call, "timeout").Inc()
		if trips && time.Since(start) >= b.every {
			b.trip(call, err)
		}
	default:
		b.calls.WithLabelValues(call, "error").Inc()
	}
}

// timedOut reports whether err is a call that ran out of time: its
// context's deadline, a connection's read or write deadline, or the
// connection pool's wait. A cancelled context (the client hung up) is not.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	netErr, ok := errors.AsType[net.Error](err)
	return ok && netErr.Timeout()
}

// trip opens the breaker and starts its probe, unless one runs.
func (b *Breaker) trip(call string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if !b.open.Swap(true) {
		b.trips.Inc()
		b.logger.Warn("redis timed out on the request path; skipping its request-path calls until it answers a probe", "call", call, "err", err)
	}
	if b.probing {
		return
	}
	b.probing = true
	b.probes.Go(b.probe)
}

// probe pings Redis every b.every until it answers, then closes the
// breaker; it stops at Close.
func (b *Breaker) probe() {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.every)
		err := b.rdb.Ping(ctx).Err()
		cancel()
		if err != nil {
			continue
		}
		b.mu.Lock()
		b.probing = false
		b.open.Store(false)
		b.mu.Unlock()
		b.logger.Info("redis answers again; request-path calls resume")
		return
	}
}

// Close stops the probe (waiting for it); the breaker opens no more.
// It does not close the client.
func (b *Breaker) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	b.mu.Unlock()
	b.probes.Wait()
}
