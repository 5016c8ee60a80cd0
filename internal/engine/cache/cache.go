// Package cache is memgate's one cache mechanism: values read from a store
// (items, vector and text indexes, turns, facts, summaries), embeddings and
// token counts, kept in process memory, bounded in bytes, least recently
// used evicted first, with metrics. A key holds the revision of what its
// value was read from, read once per request before the value: a write moves
// the revision, and what was read before it ages out unread. Nothing is
// invalidated entry by entry, but an erasure drops the user's entries.
// (Embeddings and token counts, fixed by text and model, have no revision.)
// A cache whose keys name an owner but no revision (embeddings, the fact
// extraction model's answers) is bounded in age too (ExpireAfter): an
// erasure served by another process, whose notice this one missed, reaches
// it within that age.
package cache

import (
	"container/list"
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

// entryOverhead is roughly an entry's list element, map entry and key.
const entryOverhead = 128

// Cache maps keys to values, bounded in bytes, least recently used evicted
// first. It is safe for concurrent use. Its values are shared with every
// caller, read-only.
type Cache[K comparable, V any] struct {
	sizeOf func(K, V) int
	max    int

	mu    sync.Mutex
	elems map[K]*list.Element // of *entry[K, V]
	order list.List           // most recently used first
	bytes int

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

type entry[K comparable, V any] struct {
	key  K
	val  V
	size int
	at   time.Time // when put, for an age bound (ExpireAfter)
}

// New returns an empty Cache named name (its metrics' cache label), bounded
// at max bytes, accounting each entry as sizeOf says (plus a fixed overhead).
func New[K comparable, V any](name string, max int, sizeOf func(K, V) int) *Cache[K, V] {
	c := &Cache[K, V]{sizeOf: sizeOf, max: max, elems: map[K]*list.Element{}}
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
	en := e.Value.(*entry[K, V])
	if c.maxAge > 0 && c.now().Sub(en.at) >= c.maxAge {
		c.remove(e)
		c.misses.Inc()
		return v, false
	}
	c.hits.Inc()
	c.order.MoveToFront(e)
	return en.val, true
}

// Put keeps v under key in place of what it held, evicting least recently
// used entries past the bound; a value larger than the bound is not kept
// (and what key held is dropped).
func (c *Cache[K, V]) Put(key K, v V) {
	size := entryOverhead + c.sizeOf(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.elems[key] = c.order.PushFront(&entry[K, V]{key: key, val: v, size: size, at: at})
	c.bytes += size
	for c.bytes > c.max {
		c.remove(c.order.Back())
		c.evictions.Inc()
	}
}

// Drop removes every entry whose key match reports (visiting them all):
// what an erasure erased does not wait to be evicted.
func (c *Cache[K, V]) Drop(match func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.elems {
		if match(k) {
			c.remove(e)
		}
	}
}

// sweep drops the entries put maxAge or longer before now; c.mu is held.
func (c *Cache[K, V]) sweep(now time.Time) {
	for _, e := range c.elems {
		if now.Sub(e.Value.(*entry[K, V]).at) >= c.maxAge {
			c.remove(e)
		}
	}
	c.swept = now
}

// Clear removes every entry.
func (c *Cache[K, V]) Clear() { c.Drop(func(K) bool { return true }) }

// remove forgets e; c.mu is held.
func (c *Cache[K, V]) remove(e *list.Element) {
	en := c.order.Remove(e).(*entry[K, V])
	delete(c.elems, en.key)
	c.bytes -= en.size
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
