package itemindex

import (
	"container/list"
	"iter"
	"sync"
)

// slotOverhead is what one cached key is accounted for besides its value
// (the slot, the map entry, the list element), roughly.
const slotOverhead = 256

// Key names one user's items, and for vectors one model and dimension
// (Model "" and Dims 0 where unused).
type Key struct {
	Tenant, User, Model string
	Dims                int
}

// cached is what a userCache holds per key: a pointer (nil for none) that
// reports roughly how many bytes it holds.
type cached interface {
	comparable
	size() int
}

// userSlot holds a key's cached value; its mutex serializes the key's
// refreshes, so one reader at a time extends or replaces the value.
type userSlot[V cached] struct {
	key Key
	mu  sync.Mutex
	// val is the key's value (nil: none), written holding both mu and
	// userCache.mu, so either suffices to read it.
	val  V
	size int // accounted size of val, under userCache.mu
	elem *list.Element
	// tooBig, under mu, is set once the key's value exceeded the share of
	// one user: the key is then searched by the store's SQL until the slot
	// is evicted.
	tooBig bool
}

// userCache keeps a value per user (and model) in memory, least recently
// used evicted first past max bytes. It is safe for concurrent use. A
// value's currency is its owner's business: the Index checks it against
// the user's Revisions before each use.
type userCache[V cached] struct {
	mu    sync.Mutex
	slots map[Key]*userSlot[V]
	lru   *list.List // of *userSlot[V], most recently used first
	bytes int
	max   int
}

func newUserCache[V cached](max int) *userCache[V] {
	return &userCache[V]{slots: map[Key]*userSlot[V]{}, lru: list.New(), max: max}
}

// slot returns key's slot, created when missing, marked most recently used.
func (c *userCache[V]) slot(key Key) *userSlot[V] {
	c.mu.Lock()
	defer c.mu.Unlock()
	sl, ok := c.slots[key]
	if !ok {
		sl = &userSlot[V]{key: key}
		sl.elem = c.lru.PushFront(sl)
		c.slots[key] = sl
		return sl
	}
	c.lru.MoveToFront(sl.elem)
	return sl
}

// held returns key's slot, marked most recently used, or nil when there
// is none.
func (c *userCache[V]) held(key Key) *userSlot[V] {
	c.mu.Lock()
	defer c.mu.Unlock()
	sl, ok := c.slots[key]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(sl.elem)
	return sl
}

// value returns sl's value (nil: none).
func (c *userCache[V]) value(sl *userSlot[V]) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sl.val
}

// usage reports how many keys c holds and the bytes it accounts for them.
func (c *userCache[V]) usage() (keys, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots), c.bytes
}

// publish records v as sl's value (nil forgets it) and evicts least
// recently used slots past the bound, never sl itself. v may be sl's value
// grown in place: its size is accounted again. The caller holds sl.mu.
func (c *userCache[V]) publish(sl *userSlot[V], v V) {
	size := slotOverhead // so that slots without values are bounded too
	var none V
	if v != none {
		size += v.size()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sl.val = v
	c.bytes += size - sl.size
	sl.size = size
	if _, ok := c.slots[sl.key]; !ok { // evicted while loading: account it again
		sl.elem = c.lru.PushFront(sl)
		c.slots[sl.key] = sl
	}
	for e := c.lru.Back(); c.bytes > c.max && e != nil; {
		prev := e.Prev()
		old := e.Value.(*userSlot[V])
		if old != sl {
			c.lru.Remove(e)
			delete(c.slots, old.key)
			c.bytes -= old.size
			old.size = 0
		}
		e = prev
	}
}

// counted are one user's entries as of a revision count. Its map is read
// and written holding the user's slot's mutex.
type counted[K comparable, V any] struct {
	changed int64
	m       map[K]V
	bytes   int // sum of the entries' sizes
}

// size is roughly what u holds in memory, in bytes.
func (u *counted[K, V]) size() int { return u.bytes }

// CountedCache keeps entries per user as of a revision count (a count that
// every change of what the entries were read from moves, such as
// Revisions.Changed): asked at another count it answers nothing, and
// entries read at a newer count replace the user's. So once a change has
// committed, no later read that checked the count first is answered with
// what it changed. Users are evicted least recently used first past the
// cache's bound. It is safe for concurrent use.
type CountedCache[K comparable, V any] struct {
	users  *userCache[*counted[K, V]] // keyed by tenant and user only
	sizeOf func(K, V) int             // roughly what one entry holds, in bytes
}

// NewCountedCache returns an empty cache bounded at max bytes, accounting
// each entry as sizeOf says.
func NewCountedCache[K comparable, V any](max int, sizeOf func(K, V) int) *CountedCache[K, V] {
	return &CountedCache[K, V]{users: newUserCache[*counted[K, V]](max), sizeOf: sizeOf}
}

// Usage reports how many users c holds and the bytes it accounts for them.
func (c *CountedCache[K, V]) Usage() (users, bytes int) { return c.users.usage() }

// Get returns the entries of keys held for the user at changed (nil when
// none is held at that count), and the keys it does not hold.
func (c *CountedCache[K, V]) Get(tenant, user string, changed int64, keys []K) (map[K]V, []K) {
	sl := c.users.slot(Key{Tenant: tenant, User: user})
	sl.mu.Lock()
	defer sl.mu.Unlock()
	u := sl.val
	if u == nil || u.changed != changed {
		return nil, keys
	}
	got := make(map[K]V, len(keys))
	var missing []K
	for _, k := range keys {
		if v, ok := u.m[k]; ok {
			got[k] = v
		} else {
			missing = append(missing, k)
		}
	}
	return got, missing
}

// Fill sets dst[i] to the entry of keys[i] held for the user at changed,
// and held[i] to whether there is one (dst and held as long as keys), and
// returns how many there are: Get without building a map.
func (c *CountedCache[K, V]) Fill(tenant, user string, changed int64, keys []K, dst []V, held []bool) int {
	sl := c.users.slot(Key{Tenant: tenant, User: user})
	sl.mu.Lock()
	defer sl.mu.Unlock()
	u := sl.val
	if u == nil || u.changed != changed {
		return 0
	}
	n := 0
	for i, k := range keys {
		if v, ok := u.m[k]; ok {
			dst[i], held[i] = v, true
			n++
		}
	}
	return n
}

// Lookup returns the entry of key held for the user at changed, and
// whether there is one: Fill for one key.
func (c *CountedCache[K, V]) Lookup(tenant, user string, changed int64, key K) (V, bool) {
	keys, dst, held := [1]K{key}, [1]V{}, [1]bool{}
	c.Fill(tenant, user, changed, keys[:], dst[:], held[:])
	return dst[0], held[0]
}

// Set keeps key's entry v of the user, read at or after changed, as Put
// keeps entries.
func (c *CountedCache[K, V]) Set(tenant, user string, changed int64, key K, v V) {
	c.Put(tenant, user, changed, func(yield func(K, V) bool) { yield(key, v) })
}

// Put keeps entries of the user, read at or after changed, unless the
// cache holds the user at a newer count; an older count is dropped first,
// and an entry already held is kept as it is. A user whose entries alone
// exceed the cache's bound is not kept.
func (c *CountedCache[K, V]) Put(tenant, user string, changed int64, entries iter.Seq2[K, V]) {
	sl := c.users.slot(Key{Tenant: tenant, User: user})
	sl.mu.Lock()
	defer sl.mu.Unlock()
	u := sl.val
	switch {
	case u != nil && u.changed > changed:
		return
	case u == nil || u.changed < changed:
		u = &counted[K, V]{changed: changed, m: map[K]V{}}
	}
	for k, v := range entries {
		if _, held := u.m[k]; held {
			continue
		}
		u.m[k] = v
		u.bytes += c.sizeOf(k, v)
	}
	if slotOverhead+u.bytes > c.users.max {
		u = nil
	}
	c.users.publish(sl, u) // accounts u's growth, evicts past the bound
}

// Advance moves the user's entries held at count from to the newer count
// to, each entry of keys (distinct) held replaced by what edit returns for
// it (false: dropped): for a writer that knows exactly what changed
// between the two counts (a save that only appended) and so what the
// entries are at to. Entries held at another count below to are dropped,
// being stale; held at to or above, they are left as they are. A user not
// held is left so.
func (c *CountedCache[K, V]) Advance(tenant, user string, from, to int64, keys []K, edit func(K, V) (V, bool)) {
	sl := c.users.held(Key{Tenant: tenant, User: user})
	if sl == nil {
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	u := sl.val
	switch {
	case u == nil || u.changed >= to:
		return
	case u.changed != from:
		c.users.publish(sl, nil)
		return
	}
	u.changed = to
	for _, k := range keys {
		v, held := u.m[k]
		if !held {
			continue
		}
		u.bytes -= c.sizeOf(k, v)
		if v, keep := edit(k, v); keep {
			u.m[k] = v
			u.bytes += c.sizeOf(k, v)
		} else {
			delete(u.m, k)
		}
	}
	if slotOverhead+u.bytes > c.users.max {
		u = nil
	}
	c.users.publish(sl, u) // accounts u's change, evicts past the bound
}

// Forget drops the user's entries, if any are held: for a writer that
// erased what they were read from, so that it does not stay in memory
// until evicted (it would never be answered: the erasure moved the count).
func (c *CountedCache[K, V]) Forget(tenant, user string) {
	sl := c.users.held(Key{Tenant: tenant, User: user})
	if sl == nil {
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.val != nil {
		c.users.publish(sl, nil)
	}
}
