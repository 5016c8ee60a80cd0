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

// sized is what a slot holds: a pointer (nil for none) to a value read at
// some Revisions (stamp), that reports roughly how many bytes it holds.
type sized interface {
	comparable
	size() int
	stamp() *held
}

// slot is one key's in-memory index (vectors, full-text), kept by Key
// alone: it is extended in place after inserts, so it carries the
// Revisions it was read at, checked against the request's before each use.
// Its mutex serializes the key's refreshes (and the text index's scratch
// space).
type slot[V sized] struct {
	mu sync.Mutex
	// val is the key's value (nil: none), under mu.
	val V
	// tooBig, under mu, is set once the key's value exceeded the share of
	// one user (ErrTooBig until the slot is evicted).
	tooBig bool
	// bytes is val's size when last kept, for the cache's accounting.
	bytes int
}

// slots is a cache of slots by Key.
type slots[V sized] struct{ *cache.Cache[Key, *slot[V]] }

func newSlots[V sized](name string, max int) slots[V] {
	return slots[V]{cache.New(name, max, func(_ Key, sl *slot[V]) int { return sl.bytes })}
}

// slot returns key's slot, created (and kept) when missing.
func (c slots[V]) slot(key Key) *slot[V] {
	if sl, ok := c.Get(key); ok {
		return sl
	}
	sl := &slot[V]{}
	c.Put(key, sl)
	return sl
}

// publish records v as sl's value (nil forgets it) and accounts it again in
// the cache, evicting past the bound. The caller holds sl.mu.
func (c slots[V]) publish(key Key, sl *slot[V], v V) {
	var none V
	sl.val, sl.bytes = v, 0
	if v != none {
		sl.bytes = v.size()
	}
	c.Put(key, sl)
}

// current returns the value of key's slot sl, whose mutex the caller
// holds, current as of a moment during the call: the value held when the
// user's Revisions have not moved since it was read (rev was read before
// its rows), extended by load with the rows added since when only inserts
// happened, else a fresh one read whole by load. extend returns the value
// to load into: a new one for none, else the value held or, when readers
// use it outside the slot's mutex, a copy to append to. It returns
// ErrTooBig for a key too large to keep, and so does the slot until it is
// evicted.
func (c slots[V]) current(sl *slot[V], key Key, rev cache.Revisions, extend func(cur V) V, load func(V) error) (V, error) {
	var none V
	if sl.tooBig {
		return none, ErrTooBig
	}
	cur := sl.val
	if cur != none && cur.stamp().changed == rev.Changed && cur.stamp().added == rev.Added {
		return cur, nil
	}
	if cur != none && cur.stamp().changed != rev.Changed {
		cur = none
	}
	next := extend(cur)
	next.stamp().added, next.stamp().changed = rev.Added, rev.Changed
	if err := load(next); err != nil {
		sl.tooBig = errors.Is(err, ErrTooBig)
		c.publish(key, sl, none)
		return none, err
	}
	c.publish(key, sl, next)
	return next, nil
}

// limit is the share of the cache's bound one key may take.
func (c slots[V]) limit() int { return c.Max() / 4 }
