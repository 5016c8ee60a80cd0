package memory

import (
	"context"
	"sync"
)

// Memo holds reads a request makes more than once and that may answer
// from one read for all of the request: the revision counters a store
// checks its in-memory caches against, which one recall would otherwise
// read for the full-text search, the query's term statistics, the vector
// search and the turns around the hits, one round trip each. A read is
// current as of a moment during the request, which is all a cache
// validated by it promises. It is safe for concurrent use: concurrent
// readers of one key wait for the first one's read.
type Memo struct {
	mu sync.Mutex
	m  map[any]*memoEntry
}

type memoEntry struct {
	done chan struct{}
	val  any
	err  error
}

type memoKey struct{}

// WithMemo returns ctx carrying a new, empty Memo, for one request's reads.
func WithMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &Memo{m: map[any]*memoEntry{}})
}

// MemoFrom returns ctx's Memo, or nil when it carries none.
func MemoFrom(ctx context.Context) *Memo {
	m, _ := ctx.Value(memoKey{}).(*Memo)
	return m
}

// Do returns the value read for key, calling read for it the first time
// (concurrent calls for key wait for that read, or for ctx to end). A
// failed read is not kept: the next call reads again. key must be
// comparable; use a type of the caller's own to keep keys apart.
func (m *Memo) Do(ctx context.Context, key any, read func() (any, error)) (any, error) {
	for {
		m.mu.Lock()
		e, ok := m.m[key]
		if !ok {
			e = &memoEntry{done: make(chan struct{})}
			m.m[key] = e
			m.mu.Unlock()
			e.val, e.err = read()
			if e.err != nil {
				m.mu.Lock()
				delete(m.m, key)
				m.mu.Unlock()
			}
			close(e.done)
			return e.val, e.err
		}
		m.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e.val, nil
		}
		// The first read failed: read again (it may have failed with its
		// caller's own context).
	}
}

// Memoized returns read's value for key from ctx's Memo (see Memo.Do), or
// calls read directly when ctx carries none. The value is shared by every
// caller of the request: they must not modify it.
func Memoized[T any](ctx context.Context, key any, read func() (T, error)) (T, error) {
	m := MemoFrom(ctx)
	if m == nil {
		return read()
	}
	v, err := m.Do(ctx, key, func() (any, error) { return read() })
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}
