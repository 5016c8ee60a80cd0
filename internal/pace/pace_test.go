package pace

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/testenv"
)

// TestRunsAreCoalescedAndSpacedOut: requests in a loop (an erasure loop)
// do not run the task back to back. The first request runs at once; every
// run after it waits out the interval, and all the requests made meanwhile
// are served by one run. Counted, not timed: the wait is held by the test.
func TestRunsAreCoalescedAndSpacedOut(t *testing.T) {
	const interval = time.Minute
	p := testenv.NewPaced()
	l := New(interval, func(context.Context) { p.Run() }, p.Wait)
	defer l.Stop()

	l.Request()
	p.Until(t, "the first run", func(r, _ int) bool { return r == 1 })
	for range 50 {
		l.Request()
	}
	p.Until(t, "the next run to wait out the interval", func(_, w int) bool { return w == 1 })
	if r, _ := p.State(); r != 1 {
		t.Fatalf("%d runs before the interval passed, want 1", r)
	}
	if d := p.Waited(0); d <= 0 || d > interval {
		t.Errorf("waited %v, want within (0, %v]", d, interval)
	}
	p.PassAll()
	p.Until(t, "one run for the 50 requests", func(r, _ int) bool { return r == 2 })
	l.Request()
	p.Until(t, "a later request's run", func(r, _ int) bool { return r == 3 })
	if r, w := p.State(); r != 3 || w != 2 {
		t.Fatalf("%d runs and %d waits, want 3 and 2 (each run after the first waits its turn)", r, w)
	}
}

// TestARunAsksToRunAgain: a run that requests again (a rewrite found one
// already running) runs again after an interval, not at once.
func TestARunAsksToRunAgain(t *testing.T) {
	p := testenv.NewPaced()
	var l *Loop
	l = New(time.Minute, func(context.Context) {
		if p.Run() == 0 {
			l.Request()
		}
	}, p.Wait)
	defer l.Stop()

	l.Request()
	p.Until(t, "the run asked again to wait out the interval", func(_, w int) bool { return w == 1 })
	if r, _ := p.State(); r != 1 {
		t.Fatalf("%d runs before the interval passed, want 1", r)
	}
	p.Pass()
	p.Until(t, "the run made again", func(r, _ int) bool { return r == 2 })
}

// TestStopCancelsTheRunInHand: Stop cancels a run in hand and returns once
// it has; a request after Stop starts nothing.
func TestStopCancelsTheRunInHand(t *testing.T) {
	started, ended := make(chan struct{}), make(chan struct{})
	runs := 0
	l := New(time.Minute, func(ctx context.Context) {
		runs++
		close(started)
		<-ctx.Done()
		close(ended)
	}, nil)
	l.Request()
	<-started
	l.Stop()
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before the run in hand ended")
	}
	l.Request()
	l.Stop()
	if runs != 1 {
		t.Fatalf("%d runs, want 1", runs)
	}
}

// TestStopReportsARequestLeftUnserved: Stop says whether a request was
// left unserved — one waiting out the interval — so that the caller can
// serve it on its way out; a Stop with every request served, or with none
// made, says no, and so does a second Stop.
func TestStopReportsARequestLeftUnserved(t *testing.T) {
	for _, tc := range []struct {
		name     string
		requests int
		want     bool
	}{
		{"none made", 0, false},
		{"every one served", 1, false},
		{"one waiting out the interval", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.NewPaced()
			l := New(time.Minute, func(context.Context) { p.Run() }, p.Wait)
			if tc.requests > 0 {
				l.Request()
				p.Until(t, "the run", func(r, _ int) bool { return r == 1 })
			}
			if tc.requests > 1 {
				l.Request()
				p.Until(t, "the next to wait", func(_, w int) bool { return w == 1 })
			}
			if got := l.Stop(); got != tc.want {
				t.Fatalf("Stop() = %v, want %v", got, tc.want)
			}
			if l.Stop() {
				t.Error("a second Stop reports a request unserved")
			}
		})
	}
}

// TestKeepRenewsUntilLost: Keep renews until renew reports the lease lost,
// calls lost once and stops renewing; a failed renewal is reported and
// tried again; stop after that returns.
func TestKeepRenewsUntilLost(t *testing.T) {
	var renewals, failures int
	lost := make(chan struct{})
	stop := Keep(context.Background(), time.Millisecond, func(context.Context) (bool, error) {
		renewals++
		switch renewals {
		case 1:
			return false, errors.New("busy")
		case 2, 3:
			return true, nil
		}
		return false, nil
	}, func(error) { failures++ }, func() { close(lost) })
	<-lost
	stop()
	if renewals != 4 || failures != 1 {
		t.Fatalf("%d renewals, %d failures; want 4 and 1", renewals, failures)
	}
}

// TestKeepStopEndsARenewal: stop cancels a renewal under way and waits
// for it.
func TestKeepStopEndsARenewal(t *testing.T) {
	started := make(chan struct{})
	stop := Keep(context.Background(), time.Millisecond, func(ctx context.Context) (bool, error) {
		close(started)
		<-ctx.Done()
		return false, ctx.Err()
	}, func(error) { t.Error("a cancelled renewal reported as failed") }, func() { t.Error("a cancelled renewal reported as lost") })
	<-started
	stop()
}
