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
	// maxPendingPurges bounds the purges waiting to be retried: past it
	// the oldest is given up (its entries are refused when processed).
	maxPendingPurges = 10_000
)

// purgeBacklog is the purges not taken yet, oldest first, each key once
// (at its latest time, which voids more), bounded. It is safe for
// concurrent use.
type purgeBacklog struct {
	wake chan struct{} // signalled by each retry

	mu       sync.Mutex
	order    []purgeKey
	at       map[purgeKey]time.Time
	inFlight int  // attempts running, a caller's or retryPurges'
	failing  bool // the last attempt that ended failed

	failed, givenUp prometheus.Counter
}

func newPurgeBacklog() *purgeBacklog {
	return &purgeBacklog{wake: make(chan struct{}, 1), at: map[purgeKey]time.Time{},
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_erasure_purges_failed_total",
			Help: "Attempts to purge an erasure's or a conversation deletion's entries from the capture and enrichment queues that failed or went unanswered (Redis unreachable); each is tried again."}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_erasure_purges_given_up_total",
			Help: "Queue purges given up (over 10,000 waiting, or left at shutdown): their entries are refused when processed and leave the queues then."}),
	}
}

// collectors are the backlog's metrics.
func (b *purgeBacklog) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.failed, b.givenUp, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "memgate_erasure_purges_pending",
		Help: "Erasures and conversation deletions whose purge of the capture and enrichment queues is being attempted or waits to be retried."},
		func() float64 { return float64(b.pending()) })}
}

// pending is how many purges wait or are being attempted.
func (b *purgeBacklog) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.order) + b.inFlight
}

// down reports whether the queues failed the last attempt that ended
// and purges wait to be retried: a caller then does not wait on them.
func (b *purgeBacklog) down() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failing && len(b.order) > 0
}

// begin counts an attempt running.
func (b *purgeBacklog) begin() {
	b.mu.Lock()
	b.inFlight++
	b.mu.Unlock()
}

// end ends an attempt at k as of at: failed (err not nil), k waits to be
// retried, at the front when front (retryPurges keeps its order). It
// returns how many purges the bound gave up to make room.
func (b *purgeBacklog) end(k purgeKey, at time.Time, err error, front bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	b.failing = err != nil
	if err == nil {
		return 0
	}
	b.failed.Inc()
	return b.add(k, at, front)
}

// retry queues k as of at to be retried, without an attempt first.
func (b *purgeBacklog) retry(k purgeKey, at time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.add(k, at, false)
}

// add queues k as of at unless it waits already (then at its later
// time), at the front when front, giving up the oldest past
// maxPendingPurges; b.mu is held. It returns how many it gave up.
func (b *purgeBacklog) add(k purgeKey, at time.Time, front bool) int {
	defer func() {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}()
	if old, ok := b.at[k]; ok {
		if at.After(old) {
			b.at[k] = at
		}
		return 0
	}
	gone := 0
	for len(b.order) >= maxPendingPurges {
		delete(b.at, b.order[0])
		b.order = b.order[1:]
		gone++
	}
	b.givenUp.Add(float64(gone))
	b.at[k] = at
	if front {
		b.order = append([]purgeKey{k}, b.order...)
	} else {
		b.order = append(b.order, k)
	}
	return gone
}

// next takes the oldest purge waiting, counting its attempt running.
func (b *purgeBacklog) next() (purgeKey, time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) == 0 {
		return purgeKey{}, time.Time{}, false
	}
	k := b.order[0]
	b.order = b.order[1:]
	at := b.at[k]
	delete(b.at, k)
	b.inFlight++
	return k, at, true
}

// drop gives up every purge waiting, returning how many.
func (b *purgeBacklog) drop() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.order)
	b.order = nil
	clear(b.at)
	b.givenUp.Add(float64(n))
	return n
}

// purgeSoon runs the purge of k as of at and waits for it while the
// queues answer: it returns what the purge removed once it is done, or
// Pending once the queues have been silent for Options.PurgeWait, the
// attempt failed, or ctx ended. A purge not done is tried again in the
// background (retryPurges) until the queues take it. While purges wait
// for the queues to come back, it does not try: it queues k behind them
// and answers Pending at once.
func (c *Capturer) purgeSoon(ctx context.Context, k purgeKey, at time.Time) Purged {
	if c.purges.down() {
		c.recordPending(k, at)
		c.gaveUp(c.purges.retry(k, at))
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
	if c.closed { // too late to start one: closing gives it up
		c.closeMu.RUnlock()
		c.recordPending(k, at) // the next process retries it
		c.purges.givenUp.Inc()
		return Purged{Pending: true}
	}
	c.purges.begin()
	c.watcher.Go(func() {
		c.recordPending(k, at)
		actx, cancel := context.WithTimeout(c.ctx, purgeTimeout)
		defer cancel()
		n, err := c.run(actx, k, at, beat)
		if err == nil {
			c.recordDone(k, at)
		}
		c.gaveUp(c.purges.end(k, at, err, false))
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

// retryPurges tries the purges the queues did not take, oldest first,
// until c.ctx ends, waiting after one that fails (doubling from
// purgeRetryFirst to purgeRetryMax) before it tries again. What still
// waits when the Capturer has closed is given up (giveUpPurges).
func (c *Capturer) retryPurges() {
	wait, failing := purgeRetryFirst, false
	for {
		k, at, ok := c.purges.next()
		if !ok {
			select {
			case <-c.ctx.Done():
				return
			case <-c.purges.wake:
			}
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, purgeTimeout)
		_, err := c.run(ctx, k, at, func() {})
		cancel()
		if err == nil {
			c.recordDone(k, at)
		}
		c.gaveUp(c.purges.end(k, at, err, true))
		if c.ctx.Err() != nil {
			return
		}
		if err == nil {
			if failing {
				c.logger.Info("queue purges taken again")
			}
			wait, failing = purgeRetryFirst, false
			continue
		}
		if !failing { // said once an outage; the metrics count the attempts
			c.logger.Warn("queue purge retried in the background failed; trying again until the queues take it", "err", err)
		}
		failing = true
		pace.Sleep(c.ctx, wait)
		wait = min(2*wait, purgeRetryMax)
	}
}

// giveUpPurges gives up the purges still waiting once the Capturer has
// closed (its attempts and retryPurges ended).
func (c *Capturer) giveUpPurges() {
	if n := c.purges.drop(); n > 0 {
		c.logger.Error("queue purges given up at shutdown; their entries are refused when processed and leave the queues then", "purges", n)
	}
}

// gaveUp logs the purges the backlog's bound gave up.
func (c *Capturer) gaveUp(n int) {
	if n > 0 {
		c.logger.Error("queue purges given up: too many waiting; their entries are refused when processed and leave the queues then", "purges", n)
	}
}
