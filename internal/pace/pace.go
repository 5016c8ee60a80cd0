// Package pace runs a background task on request, coalescing requests and
// spacing the runs out: the shape of the maintenance a store asks for after
// an erasure (PostgreSQL's VACUUM, Redis's append-only file rewrite), which
// an erasure loop must not turn into back-to-back runs; Sleep, the
// context-aware wait every background loop uses; Every, their ticker; and
// Keep, the renewal of a lease while its holder works.
package pace

import (
	"context"
	"sync"
	"time"
)

// Loop calls its task on request, one run at a time: requests made while a
// run is in hand are served by a single next run, and runs start at least
// an interval apart. The loop's goroutine starts with the first request;
// Stop ends it.
type Loop struct {
	interval time.Duration
	run      func(ctx context.Context)
	wait     func(ctx context.Context, d time.Duration)
	kick     chan struct{}

	start, stopOnce sync.Once
	ctx             context.Context
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	unserved        bool // the loop stopped with a request in hand, not run; read after wg
}

// New returns a Loop that runs run at most once an interval. run gets a
// context that ends when the Loop stops. wait returns after d or when its
// context ends; nil is Sleep (a test passes its own to hold the interval).
func New(interval time.Duration, run func(ctx context.Context), wait func(ctx context.Context, d time.Duration)) *Loop {
	if wait == nil {
		wait = func(ctx context.Context, d time.Duration) { Sleep(ctx, d) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Loop{interval: interval, run: run, wait: wait, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// Request asks for a run after the one in hand, if any; it never blocks.
// A run may call it to be run again an interval later.
func (l *Loop) Request() {
	l.start.Do(func() { l.wg.Go(l.loop) })
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Stop ends the loop, cancelling a run in hand and waiting for it to
// return, and reports whether a request was left unserved: one waiting
// out the interval, or made and not run yet (a run it cancelled is the
// task's to judge). The caller decides what that needs: a quick task may
// run once more on the way out; a long one is left to the next process.
// Requests after Stop start nothing; a second Stop reports false.
func (l *Loop) Stop() (unserved bool) {
	l.stopOnce.Do(func() {
		l.start.Do(func() {}) // no loop starts after Stop
		l.cancel()
		l.wg.Wait()
		select {
		case <-l.kick:
			unserved = true
		default:
			unserved = l.unserved
		}
	})
	return unserved
}

func (l *Loop) loop() {
	var last time.Time // when the last run started
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.kick:
		}
		if !last.IsZero() {
			if d := l.interval - time.Since(last); d > 0 {
				l.wait(l.ctx, d)
				select { // requests made meanwhile are served by this run
				case <-l.kick:
				default:
				}
			}
		}
		if l.ctx.Err() != nil { // stopped with this request in hand
			l.unserved = true
			return
		}
		last = time.Now()
		l.run(l.ctx)
	}
}

// Sleep waits d or until ctx ends, reporting whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Keep renews a lease every interval, on a goroutine of its own, until
// ctx ends, the stop it returns is called, or renew reports that the
// lease is no longer held (lost is then called). renew's context ends
// with ctx and stop, so a renewal under way gives up; a renewal that
// fails (failed is called with its error) is tried again at the next
// interval. stop waits for the goroutine to end.
func Keep(ctx context.Context, interval time.Duration, renew func(ctx context.Context) (held bool, err error), failed func(error), lost func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, interval, func() bool {
			held, err := renew(ctx)
			switch {
			case ctx.Err() != nil:
				return false
			case err != nil:
				failed(err)
			case !held:
				lost()
				return false
			}
			return true
		})
	}()
	return func() { cancel(); <-done }
}

// Every calls fn every interval until ctx ends or fn returns false.
func Every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}
