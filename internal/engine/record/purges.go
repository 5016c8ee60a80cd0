package record

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/pace"
)

// Purges the queues do not take at once: an erasure's or a deletion's
// call waits for its purge only while the queues answer (purgeSoon), so
// that a Redis dropping packets (whose commands each wait out the
// client's read timeouts and retries: 5–10 s a queue, measured) never
// holds the answer. What they did not take is retried here, oldest first,
// until they do; meanwhile the store refuses what those entries would
// write (their erasure's or deletion's tombstone), so nothing erased is
// stored when a worker drains them instead.
const (
	// purgeTimeout bounds one attempt at a purge.
	purgeTimeout = 2 * time.Minute
	// purgeRetryFirst and purgeRetryMax pace the attempts that fail:
	// the wait doubles from the first to the max.
	purgeRetryFirst = 250 * time.Millisecond
	purgeRetryMax   = 5 * time.Second
	// maxPendingPurges bounds the purges a Capturer without a store
	// keeps in memory (memLedger): past it the oldest is given up (its
	// entries are refused when processed).
	maxPendingPurges = 10_000
)

// purgeState is what the Capturer knows of its purges beside its ledger
// (PurgeLedger, which alone lists the purges not done): the attempts
// running, whether the queues failed the last attempt that ended, and
// how many purges the ledger listed at its last reading, plus the ones
// owed since. It is safe for concurrent use.
type purgeState struct {
	wake chan struct{} // signalled by each purge owed

	mu       sync.Mutex
	inFlight int  // callers' attempts running
	failing  bool // the last attempt that ended failed
	listed   int  // not done, as the ledger last listed them (up to sweepBatch), and owed since

	failed, givenUp prometheus.Counter
}

func newPurgeState() *purgeState {
	return &purgeState{wake: make(chan struct{}, 1),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_erasure_purges_failed_total",
			Help: "Attempts to purge an erasure's or a conversation deletion's entries from the capture and enrichment queues that failed or went unanswered (Redis unreachable); each is tried again."}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_erasure_purges_given_up_total",
			Help: "Queue purges given up (kept in memory, without a store: over 10,000 waiting, or left at shutdown): their entries are refused when processed and leave the queues then."}),
	}
}

// collectors are the purges' metrics.
func (b *purgeState) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.failed, b.givenUp, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "memgate_erasure_purges_pending",
		Help: "Erasures and conversation deletions whose purge of the capture and enrichment queues is being attempted or waits to be retried (as the store last listed them, up to 256)."},
		func() float64 { return float64(b.pending()) })}
}

// pending is how many purges wait or are being attempted.
func (b *purgeState) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight + b.listed
}

// down reports whether the queues failed the last attempt that ended:
// a caller then does not wait on them.
func (b *purgeState) down() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failing
}

// begin counts a caller's attempt running.
func (b *purgeState) begin() {
	b.mu.Lock()
	b.inFlight++
	b.mu.Unlock()
}

// end ends a caller's attempt, failed when err is not nil (settle).
func (b *purgeState) end(err error) {
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	b.settle(err)
}

// settle records how an attempt ended: failed (err not nil), counted.
func (b *purgeState) settle(err error) {
	b.mu.Lock()
	b.failing = err != nil
	b.mu.Unlock()
	if err != nil {
		b.failed.Inc()
	}
}

// owed counts a purge recorded as pending, and wakes retryPurges.
func (b *purgeState) owed() {
	b.mu.Lock()
	b.listed++
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// list records how many purges the ledger listed not done. None: the
// queues are not failing any purge (the next caller tries them).
func (b *purgeState) list(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listed = n
	if n == 0 {
		b.failing = false
	}
}

// purgeSoon runs the purge of k as of at and waits for it while the
// queues answer: it returns what the purge removed once it is done, or
// Pending once the queues have been silent for Options.PurgeWait, the
// attempt failed, or ctx ended. A purge that fails is recorded pending
// in the ledger (owe; a store's erasure recorded it already) and tried
// again in the background (retryPurges) until the queues take it. While
// the queues fail, it does not try: it records k pending and answers
// Pending at once.
func (c *Capturer) purgeSoon(ctx context.Context, k purgeKey, at time.Time) Purged {
	if c.purges.down() {
		c.owe(k, at)
		return Purged{Pending: true}
	}
	var last atomic.Int64 // unix nanoseconds of the queues' last sign of life
	beat := func() { last.Store(time.Now().UnixNano()) }
	beat()
	type result struct {
		n   Purged
		err error
	}
	done := make(chan result, 1)
	c.closeMu.RLock()
	if c.closed { // too late to start one
		c.closeMu.RUnlock()
		if c.mem == nil {
			c.owe(k, at) // the store keeps it: the next process retries it
		} else {
			c.purges.givenUp.Inc()
		}
		return Purged{Pending: true}
	}
	c.purges.begin()
	c.watcher.Go(func() {
		actx, cancel := context.WithTimeout(c.ctx, purgeTimeout)
		defer cancel()
		n, err := c.run(actx, k, at, beat)
		if err == nil {
			c.recordDone(k, at)
		} else {
			c.owe(k, at)
		}
		c.purges.end(err)
		if err != nil {
			c.logger.Warn("queue purge of an erasure or deletion failed; retrying in the background until the queues take it", "tenant", k.tenant, "err", err)
		}
		done <- result{n, err}
	})
	c.closeMu.RUnlock()
	tick := time.NewTicker(max(c.opts.PurgeWait/8, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			r.n.Pending = r.err != nil
			return r.n
		case <-ctx.Done():
			return Purged{Pending: true}
		case <-tick.C:
			if time.Since(time.Unix(0, last.Load())) >= c.opts.PurgeWait {
				return Purged{Pending: true}
			}
		}
	}
}

// retryPurges goes through the purges the ledger lists (sweep) until
// c.ctx ends: at start (those a process that stopped left pending), every
// Options.PurgeSweep (those another process gave up, or failed), and
// each time one is owed here (an attempt failed). A sweep the queues
// fail is tried again after a wait doubling from purgeRetryFirst to
// purgeRetryMax, until they take it; a ledger that cannot be read waits
// for the next sweep.
func (c *Capturer) retryPurges() {
	t := time.NewTicker(c.opts.PurgeSweep)
	defer t.Stop()
	wait, failing := purgeRetryFirst, false
	for c.ctx.Err() == nil {
		more, err := c.sweep()
		if c.ctx.Err() != nil {
			return
		}
		if err != nil {
			if !failing { // said once an outage; the metrics count the attempts
				c.logger.Warn("queue purges retried in the background failed; trying again until the queues take them", "err", err)
			}
			failing = true
			pace.Sleep(c.ctx, wait)
			wait = min(2*wait, purgeRetryMax)
			continue
		}
		if failing {
			c.logger.Info("queue purges taken again")
		}
		wait, failing = purgeRetryFirst, false
		if more {
			continue
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.purges.wake:
		}
	}
}

// giveUpPurges gives up the purges still waiting once the Capturer has
// closed (its attempts and retryPurges ended), when it keeps them in
// memory; a store keeps them for the next process.
func (c *Capturer) giveUpPurges() {
	if c.mem == nil {
		return
	}
	if n := c.mem.drop(); n > 0 {
		c.purges.givenUp.Add(float64(n))
		c.logger.Error("queue purges given up at shutdown; their entries are refused when processed and leave the queues then", "purges", n)
	}
}

// gaveUp counts and logs the purges the memory ledger's bound gave up.
func (c *Capturer) gaveUp(n int) {
	c.purges.givenUp.Add(float64(n))
	c.logger.Error("queue purges given up: too many waiting; their entries are refused when processed and leave the queues then", "purges", n)
}
