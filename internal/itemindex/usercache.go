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

// loaded is what a slot holds: a pointer to a key's index, a T, read from
// the Source row by row (add, failing with ErrTooBig past limit bytes),
// its size roughly in bytes and the highest id it read (last; 0: none).
type loaded[T any] interface {
	*T
	size() int
	last() int64
	add(key Key, limit int, id int64, conv, ref string, text []byte, vec []float32) error
}

// slot is one key's in-memory index (vectors, full-text), kept by Key
// alone: it is extended after inserts, so it carries the Revisions it was
// read at. Its mutex serializes the key's refreshes (and the text index's
// scratch space); every field is under it.
type slot[T any, V loaded[T]] struct {
	mu             sync.Mutex
	val            V     // nil: none
	added, changed int64 // the Revisions val was read at
	tooBig         bool  // ErrTooBig until the slot is evicted
	bytes          int   // val's size, for the cache's accounting
}

// slots is a cache of slots by Key, named what it holds.
type slots[T any, V loaded[T]] struct {
	name string
	*cache.Cache[Key, *slot[T, V]]
}

func newSlots[T any, V loaded[T]](name string, max int) slots[T, V] {
	return slots[T, V]{name, cache.New(name, max, func(_ Key, sl *slot[T, V]) int { return sl.bytes })}
}

// with runs fn on key's value as of rev, holding the slot's mutex: the
// value held when the user's Revisions have not moved since it was read,
// grown by the rows added since when only Added moved (into a copy, which
// readers may use outside the mutex: see vecSet), else one read whole. A
// value past a quarter of the cache's bound is ErrTooBig, and so is the
// slot until it is evicted.
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
