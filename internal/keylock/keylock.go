// Package keylock provides a mutex per key: callers of different keys
// never wait for each other, and a wait ends with its context.
package keylock

import (
	"context"
	"sync"
	"sync/atomic"
)

// Locks is a mutex per key, created on first use and forgotten when
// nobody holds or waits for it. The zero value is ready to use; it is
// safe for concurrent use.
type Locks[K comparable] struct {
	mu      sync.Mutex
	m       map[K]*entry
	waiting atomic.Int64
}

// entry is one key's lock: a token taken by its holder, and how many
// callers hold it or wait for it.
type entry struct {
	token chan struct{}
	refs  int
}

// Lock takes key's lock, waiting until it is free or ctx ends, and
// returns what unlocks it. A free key is taken even when ctx has ended;
// a wait that ctx ends returns ctx's error, holding nothing.
func (l *Locks[K]) Lock(ctx context.Context, key K) (unlock func(), err error) {
	e := l.ref(key)
	unlock = func() { <-e.token; l.release(key, e) }
	select {
	case e.token <- struct{}{}:
		return unlock, nil
	default:
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	select {
	case e.token <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		l.release(key, e)
		return nil, ctx.Err()
	}
}

// TryLock takes key's lock when it is free, and reports whether it did;
// it never waits. ok false: it holds nothing.
func (l *Locks[K]) TryLock(key K) (unlock func(), ok bool) {
	e := l.ref(key)
	select {
	case e.token <- struct{}{}:
		return func() { <-e.token; l.release(key, e) }, true
	default:
		l.release(key, e)
		return nil, false
	}
}

// Waiting reports how many Lock calls wait for a key held by another.
func (l *Locks[K]) Waiting() int64 { return l.waiting.Load() }

// ref takes a reference to key's entry, made when there is none.
func (l *Locks[K]) ref(key K) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[K]*entry{}
	}
	e := l.m[key]
	if e == nil {
		e = &entry{token: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	return e
}

// release drops a reference to key's entry e, and the entry with the last.
func (l *Locks[K]) release(key K, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, key)
	}
}
