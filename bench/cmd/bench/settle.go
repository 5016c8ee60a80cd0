package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Settling: a memory-on cell leaves work behind in its gateway after its
// captures are stored — the capture worker's hooks (fact extraction and
// summaries, which call the upstream; recall indexing) run on — and the
// prefill leaves thousands of exchanges' worth. A cell measured while that
// runs measures it too: the pass-through cell after the prefill read 4-10
// µs more CPU per request and a higher latency than on an idle gateway.
// So every cell starts once the server processes have been quiet.

// Settling thresholds: the servers are quiet when, together, they used
// less than settleLimit of CPU over settleWindow; a cell waits at most
// settleWithin for that.
const (
	settleWindow = 200 * time.Millisecond
	settleLimit  = 10 * time.Millisecond // 5% of one CPU
	settleWithin = 60 * time.Second
)

// settle waits until the processes whose total CPU time cpu reports have
// used less than limit over one window, for at most within. It reports how
// long it waited and whether they settled.
func settle(ctx context.Context, cpu func() (time.Duration, error), window, limit, within time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	last, err := cpu()
	if err != nil {
		return 0, false, err
	}
	for {
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-time.After(window):
		}
		now, err := cpu()
		if err != nil {
			return time.Since(start), false, err
		}
		if now-last < limit {
			return time.Since(start), true, nil
		}
		if time.Since(start) >= within {
			return time.Since(start), false, nil
		}
		last = now
	}
}

// serversCPU returns the total CPU time of servers' processes.
func serversCPU(servers map[string]*server) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		var total time.Duration
		for name, s := range servers {
			st, err := s.stats()
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			total += st.cpu
		}
		return total, nil
	}
}

// settleServers waits for servers to be quiet before a cell, saying so on
// stderr when that took long or did not happen.
func settleServers(ctx context.Context, servers map[string]*server, stderr io.Writer) error {
	waited, ok, err := settle(ctx, serversCPU(servers), settleWindow, settleLimit, settleWithin)
	switch {
	case err != nil:
		return fmt.Errorf("settle: %w", err)
	case !ok:
		fmt.Fprintf(stderr, "  servers still busy after %v; measuring anyway\n", waited.Round(time.Millisecond))
	case waited > 2*time.Second:
		fmt.Fprintf(stderr, "  servers settled after %v\n", waited.Round(time.Millisecond))
	}
	return nil
}
