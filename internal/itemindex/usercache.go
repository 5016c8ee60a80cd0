package itemindex

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// Key names one user's items, and for vectors one model and dimension
// (Model "" and Dims 0 where unused).
type Key struct {
	Tenant, User, Model string
	Dims                int
}

// loaded is what a slot holds: a pointer (nil for none) to a key's index,
// a T, read from the Source, row by row.
type loaded[T any] interface {
	*T
	// size is roughly how many bytes the value holds.
	size() int
	// last is the highest id read (0: none).
	last() int64
	// add reads one of key's rows (Source.Load), failing with ErrTooBig
	// once the value passes limit bytes.
	add(key Key, limit int, id int64, conv, ref string, text []byte, vec []float32) error
}

// slot is one key's in-memory index (vectors, full-text), kept by Key
// alone: it is extended in place after inserts, so it carries the
// Revisions it was read at, checked against the request's before each use.
// Its mutex serializes the key's refreshes (and the text index's scratch
// space); every field is under it.
type slot[T any, V loaded[T]] struct {
	mu             sync.Mutex
	val            V     // nil: none
	added, changed int64 // the Revisions val was read at
	// tooBig is set once the key's value exceeded the share of one user
	// (ErrTooBig until the slot is evicted).
	tooBig bool
	bytes  int // val's size when kept, for the cache's accounting
}

// slots is a cache of slots by Key, named what it holds.
type slots[T any, V loaded[T]] struct {
	name string
	*cache.Cache[Key, *slot[T, V]]
}

func newSlots[T any, V loaded[T]](name string, max int) slots[T, V] {
	return slots[T, V]{name, cache.New(name, max, func(_ Key, sl *slot[T, V]) int { return sl.bytes })}
}

// with runs fn on key's value, current as of a moment during the call,
// holding the slot's mutex: the value held when the user's Revisions have
// not moved since it was read (rev was read before its rows), grown by the
// rows added since when only inserts happened (read into a copy of the
// value held, which readers may use outside the slot's mutex: see vecSet),
// else a fresh one read whole. A key's value may take a quarter of the
// cache's bound: past it, with returns ErrTooBig, and so does the slot
// until it is evicted.
func (c slots[T, V]) with(ctx context.Context, src Source, key Key, rev memory.Revisions, fn func(V)) error {
	sl, ok := c.Get(key)
	if !ok {
		sl = &slot[T, V]{}
		c.Put(key, sl)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.tooBig {
		return ErrTooBig
	}
	if sl.val == nil || sl.added != rev.Added || sl.changed != rev.Changed {
		next := V(new(T))
		if sl.val != nil && sl.changed == rev.Changed {
			*next = *sl.val
		}
		err := src.Load(ctx, key, next.last(), func(id int64, conv, ref string, text []byte, vec []float32) error {
			return next.add(key, c.Max()/4, id, conv, ref, text, vec)
		})
		if err != nil {
			sl.val, sl.bytes, sl.tooBig = nil, 0, errors.Is(err, ErrTooBig)
			c.Put(key, sl) // accounted again, evicting past the bound
			if sl.tooBig {
				return ErrTooBig
			}
			return fmt.Errorf("load %s: %w", c.name, err)
		}
		sl.val, sl.bytes, sl.added, sl.changed = next, next.size(), rev.Added, rev.Changed
		c.Put(key, sl)
	}
	fn(sl.val)
	return nil
}
