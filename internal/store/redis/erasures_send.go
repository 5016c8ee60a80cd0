package redis

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/pace"
)

// maxPendingNotices bounds the notices waiting to be published (a few
// hundred KiB of ids): past it they give way to one notice telling every
// process to forget everyone (everyonePayload).
const maxPendingNotices = 10_000

// Publish queues a notice telling every subscribed process that the user
// of tenant was erased (or one of their conversations deleted), for Send
// to publish; it never waits on Redis. A notice for a user whose notice
// waits already (and is not being published) is not queued again: the
// one waiting tells of both erasures. Past maxPendingNotices the waiting
// notices give way to one telling every process to forget everyone.
func (e *Erasures) Publish(tenant, user string) {
	e.put(notice{Tenant: tenant, User: user})
}

// Send publishes the notices Publish queues, oldest first, until ctx
// ends, each in an attempt bounded by its publish timeout: one that fails
// (Redis unreachable) is tried again, after a wait doubling from
// retry.first to retry.max, before any queued after it. When ctx ends it
// spends one more publish timeout publishing what is left; what is still
// left then is logged as given up (the other processes forget it by their
// caches' age bound, cache.UnrevisedMaxAge).
func (e *Erasures) Send(ctx context.Context) {
	wait, failing := e.retry.first, false
	for {
		payload, undo, ok := e.take()
		if !ok {
			select {
			case <-ctx.Done():
				e.flush()
				return
			case <-e.wake:
			}
			continue
		}
		err := e.publish(ctx, payload)
		e.settle(err, undo)
		if ctx.Err() != nil {
			e.flush()
			return
		}
		if err == nil {
			if failing {
				e.logger.Info("redis: erasure notices published again")
			}
			wait, failing = e.retry.first, false
			continue
		}
		e.failed.Inc()
		if !failing { // said once an outage; the metrics count the attempts
			e.logger.Warn("redis: erasure notice not published; trying again until Redis takes it", "err", err)
		}
		failing = true
		pace.Sleep(ctx, wait)
		wait = min(2*wait, e.retry.max)
	}
}

// flush publishes what is queued within one publish timeout, as Send
// ends, and logs what it could not.
func (e *Erasures) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), e.publishWait())
	defer cancel()
	for {
		payload, undo, ok := e.take()
		if !ok {
			return
		}
		err := e.publish(ctx, payload)
		e.settle(err, undo)
		if err != nil {
			e.logger.Error("redis: erasure notices given up at shutdown; other processes forget them by their caches' age bound",
				"notices", e.pending(), "err", err)
			return
		}
	}
}

// publish publishes payload within its publish timeout.
func (e *Erasures) publish(ctx context.Context, payload string) error {
	ctx, cancel := context.WithTimeout(ctx, e.publishWait())
	defer cancel()
	return e.rdb.Publish(ctx, e.channel, payload).Err()
}

// settle ends the attempt take began: published (err nil), it counts;
// failed, the notice goes back (undo).
func (e *Erasures) settle(err error, undo func()) {
	if err == nil {
		e.published.Inc()
	}
	e.done(err == nil, undo)
}

// backoff paces the attempts that fail: first, doubling to max.
type backoff struct{ first, max time.Duration }

// outbox is the notices queued and not yet published, oldest first, each
// user's at most once, bounded: past max they give way to one notice
// telling everyone to forget everyone. It is safe for concurrent use.
type outbox struct {
	max  int
	wake chan struct{} // signalled by each put

	mu       sync.Mutex
	queue    []notice
	queued   map[notice]bool
	everyone bool // a notice to forget everyone waits, superseding queue
	inFlight bool // take gave one out, done not called yet
}

func newOutbox(max int) outbox {
	return outbox{max: max, wake: make(chan struct{}, 1), queued: map[notice]bool{}}
}

// put queues n unless it or a notice to forget everyone waits.
func (o *outbox) put(n notice) {
	o.mu.Lock()
	o.add(n, false)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// add queues n, at the front when first, unless it or a notice to forget
// everyone waits; o.mu is held.
func (o *outbox) add(n notice, first bool) {
	switch {
	case o.everyone || o.queued[n]:
	case len(o.queue) >= o.max:
		o.forgetEveryone()
	case first:
		o.queue = append([]notice{n}, o.queue...)
		o.queued[n] = true
	default:
		o.queue = append(o.queue, n)
		o.queued[n] = true
	}
}

// forgetEveryone replaces what waits by one notice to forget everyone;
// o.mu is held.
func (o *outbox) forgetEveryone() {
	o.everyone, o.queue = true, nil
	clear(o.queued)
}

// take removes the next notice to publish and returns its payload and
// what puts it back if it is not published; ok is false when none waits.
// A notice put while it is being published is queued anew: its erasure
// may have come after the one being published reached the other
// processes.
func (o *outbox) take() (payload string, undo func(), ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.everyone {
		o.everyone, o.inFlight = false, true
		return everyonePayload, o.forgetEveryone, true
	}
	if len(o.queue) == 0 {
		return "", nil, false
	}
	n := o.queue[0]
	o.queue = o.queue[1:]
	delete(o.queued, n)
	b, err := json.Marshal(n)
	if err != nil { // two strings always marshal
		panic(err)
	}
	o.inFlight = true
	return string(b), func() { o.add(n, true) }, true
}

// done ends the attempt take began, putting its notice back (undo, with
// o.mu held) unless published.
func (o *outbox) done(published bool, undo func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inFlight = false
	if !published {
		undo()
	}
}

// pending is how many notices wait or are being published.
func (o *outbox) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.queue)
	if o.everyone {
		n++
	}
	if o.inFlight {
		n++
	}
	return n
}
