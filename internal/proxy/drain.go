package proxy

import (
	"context"
	"errors"
	"sync"
)

// errShutDown is why a stream's capture started after the proxy was
// drained is not run: the process is stopping, its memory closing.
var errShutDown = errors.New("the gateway was shutting down")

// captureGroup runs the stream captures still being reassembled after
// their response ended, and refuses new ones once drained: a handler
// still unwinding after the server gave up on it (the shutdown grace
// ran out) must not start one while Drain waits, nor after.
type captureGroup struct {
	mu      sync.Mutex
	drained bool
	wg      sync.WaitGroup
	// draining ends (drain cancels it) when Drain is called: what waits
	// on it (reserve) stops.
	draining context.Context
	drain    context.CancelFunc
}

// Go runs f on a goroutine Wait and Drain wait for, and reports whether it
// did: false once Drain was called.
func (g *captureGroup) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drained {
		return false
	}
	g.wg.Go(f)
	return true
}

// Wait waits for the captures started so far.
func (g *captureGroup) Wait() { g.wg.Wait() }

// Drain refuses every later capture, stops what waits on it (reserve),
// and waits for the captures started and the places reserved.
func (g *captureGroup) Drain() {
	g.mu.Lock()
	g.drained = true
	if g.drain != nil {
		g.drain()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// reserve holds a place among the captures Wait and Drain wait for, for
// a capture that starts later (one after an upstream read on), given back
// by done (returned; once, whoever calls it); and calls f when Drain is
// called, unless stop (returned) was called first, so that f can end
// what the capture waits for: Drain waits for done. It reports false, and
// reserves nothing, once Drain was called.
func (g *captureGroup) reserve(f func()) (done func(), stop func() bool, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drained {
		return nil, nil, false
	}
	if g.draining == nil {
		g.draining, g.drain = context.WithCancel(context.Background())
	}
	g.wg.Add(1)
	return sync.OnceFunc(g.wg.Done), context.AfterFunc(g.draining, f), true
}
