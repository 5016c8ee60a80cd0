package redis

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// darkRedis is a TCP server that accepts connections and never answers
// (a Redis paused, or behind a network dropping packets); reads counts
// the bytes clients sent it.
type darkRedis struct {
	addr  string
	reads atomic.Int64
}

// mustDarkRedis starts a darkRedis, closed when the test ends.
func mustDarkRedis(tb testing.TB) *darkRedis {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	d := &darkRedis{addr: ln.Addr().String()}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					d.reads.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return d
}

// client is a client of d.
func (d *darkRedis) client(tb testing.TB) *Client {
	tb.Helper()
	c, err := NewClient("redis://" + d.addr + "/0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// TestBreakerSkipsRedisOnceItTimedOut: a guarded call that runs out of its
// time opens the breaker; the guarded calls after it fail at once with
// ErrBreakerOpen (a memory.ErrUnavailable) without reaching Redis, each
// counted as skipped, while the probe finds Redis silent; once the probe
// sees Redis answer, the breaker closes and calls reach it again.
func TestBreakerSkipsRedisOnceItTimedOut(t *testing.T) {
	dark := mustDarkRedis(t)
	dc := dark.client(t)
	live := mustClient(t)
	probed := mustDarkRedis(t).client(t) // the probe's Redis: dark until switched
	var useLive atomic.Bool
	b := newBreaker(pingFunc(func(ctx context.Context) *redis.StatusCmd {
		if useLive.Load() {
			return live.Ping(ctx)
		}
		return probed.Ping(ctx)
	}), 200*time.Millisecond, nil)
	t.Cleanup(b.Close)
	ctx := context.Background()

	call := func(c *Client) error { // bounded by the breaker
		return b.do(ctx, "queued_check", func(ctx context.Context) error { return c.Ping(ctx).Err() })
	}
	if err := call(live); err != nil || b.Open() {
		t.Fatalf("a call to a live Redis: %v, open %v; want it made, the breaker closed", err, b.Open())
	}
	if err := b.do(ctx, "queued_check", func(context.Context) error { return redis.Nil }); err == nil || b.Open() {
		t.Fatalf("a call Redis refused: %v, open %v; want its error, the breaker closed", err, b.Open())
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	slow := mustDarkRedis(t).client(t)
	if err := b.do(short, "prints_read", func(ctx context.Context) error { return slow.Ping(ctx).Err() }); err == nil || b.Open() {
		t.Fatalf("a call that ran out of a bound shorter than the probe's: %v, open %v; want its timeout, the breaker closed (Redis may be slow only)", err, b.Open())
	}
	if err := call(dc); err == nil || errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("a call that ran out of its time: %v; want its timeout", err)
	}
	// The call returned by its deadline; its outcome, which opens the
	// breaker, may be counted just after.
	waitFor(t, "the breaker to open", b.Open)
	// The call that timed out reached the dark Redis (a HELLO on a new
	// connection); the skipped ones send it nothing more.
	for dark.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	sent := dark.reads.Load()
	for range 5 {
		start := time.Now()
		err := call(dc)
		if !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, memory.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call while open: %v; want ErrBreakerOpen, a memory.ErrUnavailable and no timeout (it waited for nothing)", err)
		}
		if d := time.Since(start); d >= 100*time.Millisecond {
			t.Logf("a skipped call took %v", d) // logged, not asserted: the skip is checked below by what reached Redis
		}
	}
	// Several probe periods pass with Redis silent: the breaker stays open.
	time.Sleep(100 * time.Millisecond)
	if !b.Open() {
		t.Fatal("the breaker closed though Redis never answered a probe")
	}
	if n := value(t, b.calls.WithLabelValues("queued_check", "skipped")); n != 5 {
		t.Errorf("skipped calls counted %v, want 5", n)
	}
	if n := value(t, b.trips); n != 1 {
		t.Errorf("trips %v, want 1", n)
	}
	if n := dark.reads.Load(); n != sent {
		t.Errorf("the dark Redis received %d bytes after the breaker opened (%d before); want the skipped calls to send nothing", n, sent)
	}

	useLive.Store(true)
	waitFor(t, "the probe to see Redis answer and close the breaker", func() bool { return !b.Open() })
	if err := call(live); err != nil {
		t.Fatalf("a call once the breaker closed: %v", err)
	}
	if n := value(t, b.calls.WithLabelValues("queued_check", "ok")); n != 2 {
		t.Errorf("calls made counted %v, want 2 (before and after)", n)
	}
}

// TestBreakerCallReturnsByItsDeadline: a guarded call returns by its
// context's deadline even when the client does not (go-redis dialing past
// it): the caller is not held up; the call, which waited longer than the
// probe's period, opens the breaker once it ends.
func TestBreakerCallReturnsByItsDeadline(t *testing.T) {
	b := newBreaker(mustDarkRedis(t).client(t), time.Hour, nil)
	t.Cleanup(b.Close)
	b.every = 50 * time.Millisecond
	release := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := b.do(ctx, "prints_write", func(context.Context) error {
		<-release // a call that outlasts its caller's deadline
		return context.DeadlineExceeded
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call past its deadline: %v, want context.DeadlineExceeded, returned by the deadline", err)
	}
	time.Sleep(60 * time.Millisecond) // the call goes on past b.every
	close(release)
	waitFor(t, "the breaker to open once the call ended", b.Open)
}

// waitFor polls cond until it holds, failing after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBreakerIgnoresCancellation: a call its caller cancelled (a client
// that hung up) says nothing of Redis: the breaker stays closed.
func TestBreakerIgnoresCancellation(t *testing.T) {
	dc := mustDarkRedis(t).client(t)
	b := newBreaker(dc, time.Hour, nil)
	t.Cleanup(b.Close)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := b.do(ctx, "prints_read", func(ctx context.Context) error { return dc.Ping(ctx).Err() }); err == nil || b.Open() {
		t.Fatalf("a cancelled call: %v, open %v; want its error, the breaker closed", err, b.Open())
	}
}

// TestNilBreakerGuardsNothing: without a breaker a call is made as it is.
func TestNilBreakerGuardsNothing(t *testing.T) {
	var b *Breaker
	made := false
	if err := b.do(context.Background(), "x", func(context.Context) error { made = true; return nil }); err != nil || !made || b.Open() {
		t.Fatalf("nil breaker: %v, made %v", err, made)
	}
	b.Close()
}

// TestQueueSkipsRequestPathCallsWhileOpen: a queue's queued-turn check and
// enqueues fail at once with ErrBreakerOpen while its breaker is open,
// queueing nothing; its background calls (Pending) are not guarded.
func TestQueueSkipsRequestPathCallsWhileOpen(t *testing.T) {
	rdb := mustClient(t)
	dc := mustDarkRedis(t).client(t)
	b := newBreaker(dc, time.Hour, nil) // the probe never sees Redis: open till the end
	t.Cleanup(b.Close)
	q := mustQueue(t, QueueConfig{Breaker: b})
	ctx := context.Background()
	if err := q.EnqueueTurn(ctx, "c1", []byte("a")); err != nil {
		t.Fatal(err)
	}
	b.trip("test", context.DeadlineExceeded)
	if _, err := q.Queued(ctx, "c1"); !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("Queued while open: %v, want ErrBreakerOpen", err)
	}
	if err := q.EnqueueTurn(ctx, "c1", []byte("b")); !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("EnqueueTurn while open: %v, want ErrBreakerOpen", err)
	}
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("c")}); !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("EnqueueBatch while open: %v, want ErrBreakerOpen", err)
	}
	if n, err := q.Pending(ctx); err != nil || n != 1 {
		t.Errorf("Pending while open: %d, %v; want the one turn queued before", n, err)
	}
	// The capture worker's enrichment enqueue waits on no chat: made.
	if err := q.Unguarded().EnqueueBatch(ctx, [][]byte{[]byte("d")}); err != nil {
		t.Errorf("an unguarded EnqueueBatch while open: %v, want it made", err)
	}
	if n, err := q.Pending(ctx); err != nil || n != 2 {
		t.Errorf("Pending while open: %d, %v; want the turn and the unguarded batch", n, err)
	}
	p, r := NewPrints(rdb, "x:", b), NewResenders(rdb, "x:", b)
	if _, err := p.Prints(ctx, [32]byte{1}); !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("Prints while open: %v, want ErrBreakerOpen", err)
	}
	if _, err := r.Resends(ctx, [32]byte{1}); !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("Resends while open: %v, want ErrBreakerOpen", err)
	}
}

// TestBreakerBigEnqueueTimeoutLeavesItClosed: an enqueue sending more
// than tripMaxBytes that runs out of its time (a big batch may only be
// slow to send) is bounded and counted but leaves the breaker closed, so
// that one big batch does not make every chat skip Redis; a small one
// that runs out of its time opens it.
func TestBreakerBigEnqueueTimeoutLeavesItClosed(t *testing.T) {
	dc := mustDarkRedis(t).client(t)
	b := newBreaker(dc, time.Hour, nil)
	t.Cleanup(b.Close)
	b.every = 100 * time.Millisecond
	q := newQueue(dc, "x:capture", "capture", "workers", 0, nil, b)
	ctx := context.Background()
	big := [][]byte{make([]byte, tripMaxBytes/2), make([]byte, tripMaxBytes/2+1)}
	if err := q.EnqueueBatch(ctx, big); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a big batch to a dark Redis: %v, want its timeout", err)
	}
	waitFor(t, "the big batch's timeout counted", func() bool { return value(t, b.calls.WithLabelValues("enqueue_capture", "timeout")) == 1 })
	if b.Open() {
		t.Fatal("a big batch that timed out opened the breaker")
	}
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("small")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a small batch to a dark Redis: %v, want its timeout", err)
	}
	waitFor(t, "a small batch that timed out to open the breaker", b.Open)
}

// pingFunc is a probe's pinger made of a function.
type pingFunc func(ctx context.Context) *redis.StatusCmd

func (f pingFunc) Ping(ctx context.Context) *redis.StatusCmd { return f(ctx) }

// value reads counter c.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
