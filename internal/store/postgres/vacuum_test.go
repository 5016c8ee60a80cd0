package postgres

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/memgate/memgate/internal/testenv"
)

// TestVacuumRunsAreSpacedOut: erasures in a loop do not keep PostgreSQL
// vacuuming back to back. The first erasure's VACUUM runs at once; every
// request after it waits out vacuumInterval, and all the requests made
// meanwhile are served by one run. Counted, not timed: the wait is held by
// the test.
func TestVacuumRunsAreSpacedOut(t *testing.T) {
	p := testenv.NewPaced()
	run := func(context.Context) error {
		p.Run()
		return nil
	}
	v := startVacuumer(run, p.Wait, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer v.stop()

	v.request()
	p.Until(t, "the first run", func(r, _ int) bool { return r == 1 })
	for range 50 { // an erasure loop
		v.request()
	}
	p.Until(t, "the next run to wait out the interval", func(_, w int) bool { return w == 1 })
	if r, _ := p.State(); r != 1 {
		t.Fatalf("%d runs before the interval passed, want 1", r)
	}
	if d := p.Waited(0); d <= 0 || d > vacuumInterval {
		t.Errorf("waited %v, want within (0, %v]", d, vacuumInterval)
	}
	p.PassAll()
	p.Until(t, "one run for the 50 requests", func(r, _ int) bool { return r == 2 })
	v.request()
	p.Until(t, "a later request's run", func(r, _ int) bool { return r == 3 })
	if r, w := p.State(); r != 3 || w != 2 {
		t.Fatalf("%d runs and %d waits, want 3 and 2 (each run after the first waits its turn)", r, w)
	}
}
