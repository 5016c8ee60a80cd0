// Package cache is memgate's one cache mechanism: values read from a store
// (items, vector and text indexes, turns, facts, summaries), embeddings and
// token counts, kept in process memory, bounded in bytes, least recently
// used evicted first, with metrics. A key holds the revision of what its
// value was read from, read once per request before the value: a write moves
// the revision, and what was read before it ages out unread. Nothing is
// invalidated entry by entry, but an erasure drops the user's entries
// (Forget, which visits only theirs: the entries are linked by owner), and
// a value of theirs read before it is not put after it (PutSince).
// (Embeddings and token counts, fixed by text and model, have no revision.)
// A cache whose keys name an owner but no revision (embeddings, the fact
// extraction model's answers) is bounded in age too (ExpireAfter): an
// erasure served by another process, whose notice this one missed, reaches
// it within that age.
package cache

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UnrevisedMaxAge is the age bound of the caches whose keys name an owner
// but no revision (ExpireAfter): recall's embeddings and the fact
// extraction model's answers. It bounds how long another process serves
// what an erasure erased when the erasure's notice does not reach it
// (no Redis, Redis down, a notice lost). Ten minutes: long enough that a
// chat going on reuses its vectors (its turns come seconds to minutes
// apart) and a redelivered enrichment round its answers (within
// capture.reclaim_after, 30s, and capture.retry_for, 2m, by default);
// short enough that an erasure is complete everywhere within a bound an
// operator can state. A miss costs one embedding or extraction call.
const UnrevisedMaxAge = 10 * time.Minute

// entryOverhead is roughly an entry's links, map entries and key.
const entryOverhead = 128

// Owner is the user of a tenant whose value a key names.
type Owner struct{ Tenant, User string }

// Owned is a key that names its value's owner, by whom an erasure finds
// the entries it drops (Cache.Forget); a key whose Owner is the zero
// Owner (a token count's: no user's text) names none, and its entries
// are not linked by owner.
type Owned interface {
	comparable
	Owner() Owner
}

// Cache maps keys to values, bounded in bytes, least recently used evicted
// first. It is safe for concurrent use. Its values are shared with every
// caller, read-only. Its entries are linked by owner too, so that an
// erasure visits only the user's (Forget).
type Cache[K Owned, V any] struct {
	sizeOf func(K, V) int
	max    int

	mu     sync.Mutex
	elems  map[K]*entry[K, V]
	owners map[Owner]*owned[K, V]
	lru    entry[K, V] // the ring's root: lru.next is the most recently used
	bytes  int
	// erased records the calls that dropped entries of an owner or of
	// every owner (Forget, Drop, Clear): an owner's value computed from
	// what was read before one of theirs is not put (PutSince).
	erased Erasures

	hits, misses, evictions prometheus.Counter
	held                    prometheus.GaugeFunc

	// maxAge, when not zero, is how long an entry is served after its Put
	// (ExpireAfter), by the clock now; swept is when Put last dropped the
	// expired entries.
	maxAge time.Duration
	now    func() time.Time
	swept  time.Time
}

// Key names a user's value (Of) as of a count of their memory.Revisions.
type Key[T comparable] struct {
	Tenant, User string
	Rev          int64
	Of           T
}

// Owner is the user whose value k names.
func (k Key[T]) Owner() Owner { return Owner{k.Tenant, k.User} }

// entry is a held value, on the ring of all entries in order of use
// (prev, next) and on its owner's list (owner, prevOwned, nextOwned).
type entry[K comparable, V any] struct {
	key  K
	val  V
	size int
	at   time.Time // when put, for an age bound (ExpireAfter)

	prev, next           *entry[K, V]
	owner                *owned[K, V]
	prevOwned, nextOwned *entry[K, V]
}

// owned heads the list of one owner's entries.
type owned[K comparable, V any] struct {
	id    Owner
	first *entry[K, V]
}

// New returns an empty Cache named name (its metrics' cache label), bounded
// at max bytes, accounting each entry as sizeOf says (plus a fixed overhead).
func New[K Owned, V any](name string, max int, sizeOf func(K, V) int) *Cache[K, V] {
	c := &Cache[K, V]{sizeOf: sizeOf, max: max}
	c.reset()
	opts := func(n, help string) prometheus.Opts {
		return prometheus.Opts{Name: "memgate_cache_" + n, Help: help, ConstLabels: prometheus.Labels{"cache": name}}
	}
	c.hits = prometheus.NewCounter(prometheus.CounterOpts(opts("hits_total", "Lookups a memory cache answered.")))
	c.misses = prometheus.NewCounter(prometheus.CounterOpts(opts("misses_total", "Lookups a memory cache could not answer.")))
	c.evictions = prometheus.NewCounter(prometheus.CounterOpts(opts("evictions_total", "Entries a memory cache evicted past its bound.")))
	c.held = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("bytes", "Bytes a memory cache accounts for its entries.")),
		func() float64 { _, b := c.Usage(); return float64(b) })
	return c
}

// ExpireAfter bounds c's entries in age, by the clock now, and returns c:
// Get serves none put age or longer ago (dropping it), and a Put drops
// every such entry once an age (a sweep visiting them all, at most once an
// age). No timer runs: an idle cache holds its expired entries, unserved,
// until its next Put. Call it before c is used.
func (c *Cache[K, V]) ExpireAfter(age time.Duration, now func() time.Time) *Cache[K, V] {
	c.maxAge, c.now = age, now
	c.swept = now()
	return c
}

// Collectors returns c's hits, misses, evictions and bytes held (label cache).
func (c *Cache[K, V]) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.hits, c.misses, c.evictions, c.held}
}

// Max is c's bound, in bytes.
func (c *Cache[K, V]) Max() int { return c.max }

// Get returns key's value and whether c holds one, marking it used.
func (c *Cache[K, V]) Get(key K) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.elems[key]
	if !ok {
		c.misses.Inc()
		return v, false
	}
	if c.maxAge > 0 && c.now().Sub(e.at) >= c.maxAge {
		c.remove(e)
		c.misses.Inc()
		return v, false
	}
	c.hits.Inc()
	c.unlink(e)
	c.pushFront(e)
	return e.val, true
}

// Put keeps v under key in place of what it held, evicting least recently
// used entries past the bound; a value larger than the bound is not kept
// (and what key held is dropped).
func (c *Cache[K, V]) Put(key K, v V) {
	size := entryOverhead + c.sizeOf(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(key, v, size)
}

// Epoch returns the count of the calls so far that dropped an owner's
// entries (Forget) or every entry (Drop, Clear), this cache's and every
// other's (the package's Epoch), for PutSince: take it before reading
// what a value is computed from. It takes no lock.
func (c *Cache[K, V]) Epoch() uint64 { return c.erased.Epoch() }

// PutSince is Put of a value computed from what was read after Epoch
// returned epoch, and reports whether v was kept. When a Forget of key's
// owner (or a Drop, a Clear) came since, v may hold what it erased, read
// before it and put after it, where no later Forget looks: it is not kept,
// and what key held is dropped (as Put drops it for a value past the
// bound); the value is read again when next needed. Other owners' forgets
// meanwhile do not refuse it, unless so many came that the owner's is no
// longer told apart (see Erasures).
func (c *Cache[K, V]) PutSince(epoch uint64, key K, v V) bool {
	size := entryOverhead + c.sizeOf(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.erased.Since(key.Owner(), epoch) {
		if e, ok := c.elems[key]; ok {
			c.remove(e)
		}
		return false
	}
	c.put(key, v, size)
	return true
}

// put is Put of v accounted as size; c.mu is held.
func (c *Cache[K, V]) put(key K, v V, size int) {
	if e, ok := c.elems[key]; ok {
		c.remove(e)
	}
	var at time.Time
	if c.maxAge > 0 {
		at = c.now()
		if at.Sub(c.swept) >= c.maxAge {
			c.sweep(at)
		}
	}
	if size > c.max {
		return
	}
	e := &entry[K, V]{key: key, val: v, size: size, at: at}
	c.elems[key] = e
	c.pushFront(e)
	c.own(e)
	c.bytes += size
	for c.bytes > c.max {
		c.remove(c.lru.prev)
		c.evictions.Inc()
	}
}

// Forget drops the entries of the user of tenant, visiting only theirs:
// what an erasure erased does not wait to be evicted.
func (c *Cache[K, V]) Forget(tenant, user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erased.Forget(Owner{tenant, user})
	if o := c.owners[Owner{tenant, user}]; o != nil {
		for e := o.first; e != nil; e = o.first {
			c.remove(e)
		}
	}
}

// Drop removes every entry whose key match reports, visiting them all;
// PutSince counts it as a Clear.
func (c *Cache[K, V]) Drop(match func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erased.Clear()
	for k, e := range c.elems {
		if match(k) {
			c.remove(e)
		}
	}
}

// sweep drops the entries put maxAge or longer before now; c.mu is held.
func (c *Cache[K, V]) sweep(now time.Time) {
	for _, e := range c.elems {
		if now.Sub(e.at) >= c.maxAge {
			c.remove(e)
		}
	}
	c.swept = now
}

// Clear removes every entry.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erased.Clear()
	c.reset()
}

// reset empties c; c.mu is held (or c is new).
func (c *Cache[K, V]) reset() {
	c.elems, c.owners, c.bytes = map[K]*entry[K, V]{}, map[Owner]*owned[K, V]{}, 0
	c.lru.next, c.lru.prev = &c.lru, &c.lru
}

// remove forgets e; c.mu is held.
func (c *Cache[K, V]) remove(e *entry[K, V]) {
	c.unlink(e)
	c.disown(e)
	delete(c.elems, e.key)
	c.bytes -= e.size
}

// pushFront puts e first on the ring, as the most recently used; c.mu
// is held.
func (c *Cache[K, V]) pushFront(e *entry[K, V]) {
	e.prev, e.next = &c.lru, c.lru.next
	e.next.prev, c.lru.next = e, e
}

// unlink takes e off the ring; c.mu is held.
func (c *Cache[K, V]) unlink(e *entry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// own puts e first on its owner's list, if it names one; c.mu is held.
func (c *Cache[K, V]) own(e *entry[K, V]) {
	id := e.key.Owner()
	if id == (Owner{}) {
		return
	}
	o := c.owners[id]
	if o == nil {
		o = &owned[K, V]{id: id}
		c.owners[id] = o
	}
	e.owner, e.nextOwned = o, o.first
	if o.first != nil {
		o.first.prevOwned = e
	}
	o.first = e
}

// disown takes e off its owner's list, forgetting an owner left with
// none; c.mu is held.
func (c *Cache[K, V]) disown(e *entry[K, V]) {
	o := e.owner
	if o == nil {
		return
	}
	if e.prevOwned != nil {
		e.prevOwned.nextOwned = e.nextOwned
	} else {
		o.first = e.nextOwned
	}
	if e.nextOwned != nil {
		e.nextOwned.prevOwned = e.prevOwned
	}
	e.owner, e.prevOwned, e.nextOwned = nil, nil, nil
	if o.first == nil {
		delete(c.owners, o.id)
	}
}

// Usage reports how many entries c holds and the bytes it accounts for them.
func (c *Cache[K, V]) Usage() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.elems), c.bytes
}

// Sum returns the sum of size over xs, for size functions.
func Sum[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}
