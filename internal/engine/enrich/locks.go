package enrich

import (
	"context"
	"sync"
)

// keyedLocks is a mutex per key (a conversation), created on first use and
// forgotten when nobody holds or waits for it.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	ch   chan struct{} // holds a token while locked
	refs int
}

// lock waits until key is free or ctx ends, and returns the unlock function.
func (l *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyedLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyedLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		k.refs--
		if k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// failureCounts counts consecutive summariser failures per key.
type failureCounts struct {
	mu sync.Mutex
	m  map[string]int
}

// maxTracked bounds the conversations whose failures are remembered.
const maxTracked = 10000

// inc records a failure and returns the consecutive count.
func (f *failureCounts) inc(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxTracked {
		f.m = map[string]int{}
	}
	f.m[key]++
	return f.m[key]
}

// reset forgets key's failures.
func (f *failureCounts) reset(key string) {
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
}
