package postgres

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// TestVacuumRunsAreSpacedOut: erasures in a loop do not keep PostgreSQL
// vacuuming back to back. The first erasure's VACUUM runs at once; every
// request after it waits out vacuumInterval, and all the requests made
// meanwhile are served by one run. Counted, not timed: the wait is held by
// the test.
func TestVacuumRunsAreSpacedOut(t *testing.T) {
	var (
		mu     sync.Mutex
		runs   int
		waits  []time.Duration
		waited = make(chan struct{}) // closed by the test: the interval has passed
	)
	run := func(context.Context) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return nil
	}
	wait := func(ctx context.Context, d time.Duration) {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		select {
		case <-waited:
		case <-ctx.Done():
		}
	}
	v := startVacuumer(run, wait, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer v.stop()
	state := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return runs, len(waits)
	}
	until := func(what string, cond func(runs, waits int) bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
			if r, w := state(); cond(r, w) {
				return
			}
			if time.Now().After(deadline) {
				r, w := state()
				t.Fatalf("timed out waiting for %s: %d runs, %d waits", what, r, w)
			}
		}
	}

	v.request()
	until("the first run", func(r, _ int) bool { return r == 1 })
	for range 50 { // an erasure loop
		v.request()
	}
	until("the next run to wait out the interval", func(_, w int) bool { return w == 1 })
	if r, _ := state(); r != 1 {
		t.Fatalf("%d runs before the interval passed, want 1", r)
	}
	mu.Lock()
	if d := waits[0]; d <= 0 || d > vacuumInterval {
		t.Errorf("waited %v, want within (0, %v]", d, vacuumInterval)
	}
	mu.Unlock()
	close(waited)
	until("one run for the 50 requests", func(r, _ int) bool { return r == 2 })
	v.request()
	until("a later request's run", func(r, _ int) bool { return r == 3 })
	if r, w := state(); r != 3 || w != 2 {
		t.Fatalf("%d runs and %d waits, want 3 and 2 (each run after the first waits its turn)", r, w)
	}
}
