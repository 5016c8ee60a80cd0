package enrich

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/testenv"
)

// testClock is an enricher's clock (Enricher.clock) that a test moves on:
// how long the side lane has held an entry is then the test's to decide.
type testClock struct{ ahead atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// advance moves the clock on by d.
func (c *testClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// pausedQueue is a process's enrichment queue whose claims find nothing
// while paused, as if the queue were empty, so that the test decides
// which process reclaims an entry.
type pausedQueue struct {
	record.Queue
	paused atomic.Bool
	idle   atomic.Int64 // the claims made while paused
}

func (q *pausedQueue) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	if q.paused.Load() {
		q.idle.Add(1)
		pace.Sleep(ctx, block)
		return nil, nil
	}
	return q.Queue.Claim(ctx, consumer, max, staleAfter, block)
}

// pause stops q's claims and waits until its enricher made one claim
// since: the claim under way when it was paused, if any, has returned and
// its round handed what it claimed to the side lane.
func (q *pausedQueue) pause(tb testing.TB) {
	tb.Helper()
	from := q.idle.Load()
	q.paused.Store(true)
	waitFor(tb, "a claim made while paused", func() bool { return q.idle.Load() > from })
}

// other returns the id of counts other than id.
func other(counts map[string]int, id string) string {
	for k := range counts {
		if k != id {
			return k
		}
	}
	return ""
}

// TestRedisSideLaneReleasesWhatAnotherProcessMayHave: two processes share
// the Redis enrichment stream. Process A indexes two exchanges (of two
// conversations); its side lane runs the first one's side hooks, which
// hang (a slow side model), while the second waits behind it, its claim
// ageing. Past StaleAfter, process B reclaims the second, indexes it and
// runs its side hooks. When A's side lane gets to it, it must not pay
// the side model for it again: it held it past half of StaleAfter, so it
// lets it go, unacknowledged. Each exchange reaches the side model once,
// and every entry is acknowledged.
func TestRedisSideLaneReleasesWhatAnotherProcessMayHave(t *testing.T) {
	pa, pb := twoRedisProcs(t)
	qa, qb := &pausedQueue{Queue: pa.enrich}, &pausedQueue{Queue: pb.enrich}
	enqueueEnriched(t, qa, "c1", "turn 1")
	enqueueEnriched(t, qa, "c2", "turn 2")
	side := okHook() // the side model, whichever process calls it
	opts := EnrichOptions{Batch: 1, StaleAfter: 200 * time.Millisecond, Block: 10 * time.Millisecond,
		Interval: time.Millisecond, BackoffBase: time.Millisecond}

	indexA, gateA := okHook(), newGateHook()
	oa := redisEnrichOptions(opts, pa, "a")
	oa.Side = []record.Hook{side, gateA}
	ea := NewEnricher(qa, []record.Hook{indexA}, nil, oa)
	clock := &testClock{}
	ea.clock = clock.now
	runEnricher(t, ea)
	gateA.reached(t, "process A's side lane to run the first exchange")
	waitFor(t, "process A to index both exchanges", func() bool { return len(indexA.counts()) == 2 })
	gateA.mu.Lock()
	first := gateA.seen[0]
	gateA.mu.Unlock()
	second := other(indexA.counts(), first)
	// A reclaims nothing from here on (its own entries, once stale,
	// would go back to it): B does.
	qa.pause(t)

	ob := redisEnrichOptions(opts, pb, "b")
	ob.Side = []record.Hook{side}
	eb := NewEnricher(qb, []record.Hook{okHook()}, nil, ob)
	runEnricher(t, eb)
	waitFor(t, "process B to reclaim the exchange waiting in A's side lane and run its side hooks", func() bool {
		return side.counts()[second] == 1
	})
	// B stops reclaiming A's round's exchange (whose conversation A
	// leases, so B's side lane leaves it) and lets go of what it holds.
	qb.pause(t)
	waitFor(t, "process B's side lane to let go", func() bool { return value(t, eb.sidePending) == 0 })

	// A's side lane has held the second exchange past half of StaleAfter
	// (and B reclaimed it: its StaleAfter passed on Redis's clock).
	clock.advance(opts.StaleAfter)
	close(gateA.release)
	waitFor(t, "process A's side lane to be done with both exchanges", func() bool { return value(t, ea.sidePending) == 0 })
	drained(t, pa)

	handed := side.counts()
	if handed[first] != 1 || handed[second] != 1 || len(handed) != 2 {
		t.Errorf("side hooks ran %v times per exchange (first %s, second %s), want once each", handed, first, second)
	}
	if got := value(t, ea.released); got != 1 {
		t.Errorf("process A released %v exchanges from its side lane, want 1", got)
	}
}

// TestReleasedSideEntryComesBack: an exchange held by the side lane past
// half of StaleAfter (behind a side round that hangs) is released, not
// lost: redelivered once stale, it is handed to the side lane again
// without being indexed again, its side hooks run, and it is
// acknowledged — on each queue an enricher drains.
func TestReleasedSideEntryComesBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		// open returns a fresh queue and o as the gateway wires an
		// Enricher over it.
		open func(t *testing.T, o EnrichOptions) (record.Queue, EnrichOptions)
	}{
		{"memory", func(_ *testing.T, o EnrichOptions) (record.Queue, EnrichOptions) {
			return record.NewMemoryQueue(0), o
		}},
		{"sqlite outbox", func(t *testing.T, o EnrichOptions) (record.Queue, EnrichOptions) {
			ob := mustSQLiteAt(t, filepath.Join(t.TempDir(), "memgate.db")).EnrichOutbox()
			o.Lease = ob
			return ob, o
		}},
		{"redis", func(t *testing.T, o EnrichOptions) (record.Queue, EnrichOptions) {
			p := mustRedisProc(t, testenv.PostgresURL(t), testenv.RedisPrefix(t))
			return p.enrich, redisEnrichOptions(o, p, o.Consumer)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, o := tt.open(t, EnrichOptions{Consumer: "a", Batch: 1, StaleAfter: 300 * time.Millisecond,
				Block: 10 * time.Millisecond, Interval: time.Millisecond, BackoffBase: time.Millisecond})
			enqueueEnriched(t, q, "c1", "turn 1")
			enqueueEnriched(t, q, "c2", "turn 2")
			index, side, gate := okHook(), okHook(), newGateHook()
			o.Side = []record.Hook{side, gate}
			e := NewEnricher(q, []record.Hook{index}, nil, o)
			clock := &testClock{}
			e.clock = clock.now
			runEnricher(t, e)
			gate.reached(t, "the side lane to run the first exchange")
			waitFor(t, "both exchanges indexed", func() bool { return len(index.counts()) == 2 })
			clock.advance(o.StaleAfter) // the second exchange has waited past half of it
			close(gate.release)
			waitFor(t, "every entry acknowledged", func() bool {
				n, err := q.Pending(context.Background())
				return err == nil && n == 0
			})
			if got := value(t, e.released); got < 1 {
				t.Errorf("%v exchanges released from the side lane, want the one that waited", got)
			}
			for what, handed := range map[string]map[string]int{"indexed": index.counts(), "handed to the side hooks": side.counts()} {
				if len(handed) != 2 {
					t.Errorf("%d exchanges %s, want 2", len(handed), what)
				}
				for id, n := range handed {
					if n != 1 {
						t.Errorf("exchange %s %s %d times, want once", id, what, n)
					}
				}
			}
		})
	}
}
