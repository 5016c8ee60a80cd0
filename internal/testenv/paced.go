package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Paced stands in for the clock of a background loop that spaces its runs
// out (the Redis AOF rewriter, the PostgreSQL vacuumer): it counts the
// loop's runs and records its waits, each held until the test lets an
// interval pass. Counted, not timed.
type Paced struct {
	mu     sync.Mutex
	runs   int
	waits  []time.Duration
	waited chan struct{} // one per interval the test lets pass; closed: all pass
}

// NewPaced returns a Paced whose waits hold until Pass or PassAll.
func NewPaced() *Paced {
	return &Paced{waited: make(chan struct{}, 10)}
}

// Run counts a run and returns how many ran before it.
func (p *Paced) Run() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	return p.runs - 1
}

// Wait records a wait of d and returns when the test lets an interval
// pass or ctx ends.
func (p *Paced) Wait(ctx context.Context, d time.Duration) {
	p.mu.Lock()
	p.waits = append(p.waits, d)
	p.mu.Unlock()
	select {
	case <-p.waited:
	case <-ctx.Done():
	}
}

// Pass lets one interval pass: one wait, held or to come, returns.
func (p *Paced) Pass() { p.waited <- struct{}{} }

// PassAll lets every interval pass, held or to come.
func (p *Paced) PassAll() { close(p.waited) }

// State returns how many runs and waits there were.
func (p *Paced) State() (runs, waits int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs, len(p.waits)
}

// Waited returns the i-th wait's duration.
func (p *Paced) Waited(i int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waits[i]
}

// Until waits, for 60 s at most, until cond holds of the runs and waits,
// failing t with what it waited for if it never does.
func (p *Paced) Until(t testing.TB, what string, cond func(runs, waits int) bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
		if r, w := p.State(); cond(r, w) {
			return
		}
		if time.Now().After(deadline) {
			r, w := p.State()
			t.Fatalf("timed out waiting for %s: %d runs, %d waits", what, r, w)
		}
	}
}
