package sqlite

import (
	"context"
	"slices"
	"sync"
)

// writeGate orders the write transactions on the single writer connection.
// A transaction a client waits on (capture's save, an erasure) goes before
// every waiting background one (inWriteAs: enrichment's derived writes, its
// queue's claims and acknowledgements), never ahead of the one running;
// within a class, first come first served.
// Without it, a turn's save queued behind enrichment's transactions: 0.4 ms
// on average at one connection, and at 256 connections long enough for
// saves to time out into the durable queue. Background writes wait while
// saves keep coming; they are what may fall behind.
type writeGate struct {
	mu        sync.Mutex
	busy      bool
	high, low []chan struct{}
	// grants counts the transactions let through.
	grants int
}

// acquire waits for the writer; background marks a background transaction.
// It returns ctx's error, holding nothing, when ctx ends first.
func (g *writeGate) acquire(ctx context.Context, background bool) error {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.grants++
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if background {
		g.low = append(g.low, ch)
	} else {
		g.high = append(g.high, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	queued := false
	for _, q := range []*[]chan struct{}{&g.high, &g.low} {
		if i := slices.Index(*q, ch); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			queued = true
		}
	}
	g.mu.Unlock()
	if !queued { // granted as ctx ended: pass the writer on
		g.release()
	}
	return ctx.Err()
}

// release hands the writer to the next waiter, a client's first.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next chan struct{}
	switch {
	case len(g.high) > 0:
		next, g.high = g.high[0], g.high[1:]
	case len(g.low) > 0:
		next, g.low = g.low[0], g.low[1:]
	default:
		g.busy = false
		return
	}
	g.grants++
	close(next)
}
