package itemindex

import (
	"errors"
	"sync"

	"github.com/memgate/memgate/internal/engine/cache"
)

// Key names one user's items, and for vectors one model and dimension
// (Model "" and Dims 0 where unused).
type Key struct {
	Tenant, User, Model string
	Dims                int
}

// sized is what a slot holds: a pointer (nil for none) to a value that
// reports roughly how many bytes it holds.
type sized interface {
	comparable
	size() int
}

// slot is one key's in-memory index (vectors, full-text), kept by Key
// alone: it is extended in place after inserts, so it carries the
// Revisions it was read at, checked against the request's before each use.
// Its mutex serializes the key's refreshes (and the text index's scratch
// space); every field is under it.
type slot[V sized] struct {
	mu             sync.Mutex
	val            V     // nil: none
	added, changed int64 // the Revisions val was read at
	// tooBig is set once the key's value exceeded the share of one user
	// (ErrTooBig until the slot is evicted).
	tooBig bool
	bytes  int // val's size when kept, for the cache's accounting
}

// slots is a cache of slots by Key.
type slots[V sized] struct{ *cache.Cache[Key, *slot[V]] }

func newSlots[V sized](name string, max int) slots[V] {
	return slots[V]{cache.New(name, max, func(_ Key, sl *slot[V]) int { return sl.bytes })}
}

// with runs fn on key's value, current as of a moment during the call,
// holding the slot's mutex: the value held when the user's Revisions have
// not moved since it was read (rev was read before its rows), extended by
// load with the rows added since when only inserts happened, else a fresh
// one read whole by load. extend returns the value to load into: a new one
// for none, else the value held or, when readers use it outside the slot's
// mutex, a copy to append to. It returns ErrTooBig for a key too large to
// keep, and so does the slot until it is evicted.
func (c slots[V]) with(key Key, rev cache.Revisions, extend func(cur V) V, load func(V) error, fn func(V)) error {
	sl, ok := c.Get(key)
	if !ok {
		sl = &slot[V]{}
		c.Put(key, sl)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	var none V
	if sl.tooBig {
		return ErrTooBig
	}
	if sl.val == none || sl.added != rev.Added || sl.changed != rev.Changed {
		cur := sl.val
		if sl.changed != rev.Changed {
			cur = none
		}
		next := extend(cur)
		if err := load(next); err != nil {
			sl.val, sl.bytes, sl.tooBig = none, 0, errors.Is(err, ErrTooBig)
			c.Put(key, sl) // accounted again, evicting past the bound
			return err
		}
		sl.val, sl.bytes, sl.added, sl.changed = next, next.size(), rev.Added, rev.Changed
		c.Put(key, sl)
	}
	fn(sl.val)
	return nil
}

// limit is the share of the cache's bound one key may take.
func (c slots[V]) limit() int { return c.Max() / 4 }
