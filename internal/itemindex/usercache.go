package itemindex

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
)

// Key names one user's items, and for vectors one model and dimension
// (Model "" and Dims 0 where unused).
type Key struct {
	Tenant, User, Model string
	Dims                int
}

// Owner is the user whose items k names.
func (k Key) Owner() cache.Owner { return cache.Owner{Tenant: k.Tenant, User: k.User} }

// loaded is what a slot holds: a pointer to a key's index, a T, read from
// the Source row by row (add) in id order, and its size roughly in bytes.
type loaded[T any] interface {
	*T
	size() int
	add(key Key, id int64, conv, ref string, text []byte, vec []float32)
}

// slot is one key's in-memory index (vectors, full-text), kept by Key
// alone: it is extended after inserts, so it carries the Revisions it was
// read at. Its mutex serializes the key's refreshes (and the text index's
// scratch space); every field is under it.
type slot[T any, V loaded[T]] struct {
	mu             sync.Mutex
	val            V     // nil: none
	added, changed int64 // the Revisions val was read at
	last           int64 // the highest id val read (0: none)
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

// with runs fn on key's value as of rev (see the package doc), holding the
// slot's mutex; an extended value is a copy, which readers may use outside
// the mutex (see vecSet). A value past a quarter of the cache's bound is
// ErrTooBig, and so is the slot until it is evicted. A value read while
// the user was erased (a Forget of theirs since with began) serves the
// searches holding the slot, and the slot is not kept (PutSince); another
// user's Forget meanwhile leaves it kept.
func (c slots[T, V]) with(ctx context.Context, src Source, key Key, rev memory.Revisions, fn func(V)) error {
	epoch := c.Epoch()
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
		next, last := V(new(T)), int64(0)
		if sl.val != nil && sl.changed == rev.Changed {
			*next, last = *sl.val, sl.last
		}
		err := src.Load(ctx, key, last, func(id int64, conv, ref string, text []byte, vec []float32) error {
			last = id
			next.add(key, id, conv, ref, text, vec)
			if next.size() > c.Max()/4 {
				return ErrTooBig
			}
			return nil
		})
		if err != nil {
			sl.val, sl.bytes, sl.tooBig = nil, 0, errors.Is(err, ErrTooBig)
			c.PutSince(epoch, key, sl) // accounted again, evicting past the bound
			if sl.tooBig {
				return ErrTooBig
			}
			return fmt.Errorf("load %s: %w", c.name, err)
		}
		sl.val, sl.bytes, sl.added, sl.changed, sl.last = next, next.size(), rev.Added, rev.Changed, last
		c.PutSince(epoch, key, sl)
	}
	fn(sl.val)
	return nil
}

// held are the items a slot's value holds, and roughly their bytes.
type held struct {
	ids   []int64
	convs []string // conversation ("" for none) per item
	refs  []string // source per item
	bytes int
}

// hold records one item, accounting for its id and two strings and for
// the slices' spare capacity.
func (h *held) hold(id int64, conv, ref string) {
	h.ids, h.convs, h.refs = append(h.ids, id), append(h.convs, conv), append(h.refs, ref)
	h.bytes += 56 + len(conv) + len(ref)
}

// textIndex is one user's full-text index (ranking.TextIndex), document d
// being item ids[d], read and extended under its slot's mutex only (its
// searches write the index's scratch space).
type textIndex struct {
	held
	ranking.TextIndex
}

func (t *textIndex) size() int { return t.bytes + t.TextIndex.Size() }

func (t *textIndex) add(_ Key, id int64, conv, ref string, text []byte, _ []float32) {
	t.hold(id, conv, ref)
	t.Add(text)
}
