// Package cache is memgate's one cache mechanism: values read from a store
// (items, vectors and text indexes, turns, facts, summaries), embedded
// texts' vectors and token counts, kept in memory by each process, bounded
// in bytes, least recently used evicted first, with metrics. Freshness is
// decided in the key: it holds the revision of what the value was read
// from, read once per request before the value. A write moves the
// revision, so a value read before it is never looked up again (it ages
// out); nothing is invalidated entry by entry. (An embedding or a token
// count depends only on its text and model: its key needs no revision.)
package cache

import (
	"container/list"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// entryOverhead is roughly what one entry takes besides its value (list
// element, map entry, key).
const entryOverhead = 128

// Cache maps keys to values, bounded at a number of bytes (each entry
// accounted as its size function says), least recently used evicted first.
// It is safe for concurrent use. Values are shared with every caller:
// whatever Get returns is read, never written into.
type Cache[K comparable, V any] struct {
	sizeOf func(K, V) int
	max    int

	mu    sync.Mutex
	elems map[K]*list.Element // of *entry[K, V]
	order list.List           // most recently used first
	bytes int

	hits, misses, evictions prometheus.Counter
	held                    prometheus.GaugeFunc
}

// Key names a value of one user's (Of: which) as of a count of their
// memory.Revisions (Rev), read before the value.
type Key[T comparable] struct {
	Tenant, User string
	Rev          int64
	Of           T
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	size int
}

// New returns an empty Cache named name (its metrics' cache label), bounded
// at max bytes, accounting each entry as sizeOf says (plus a fixed overhead).
func New[K comparable, V any](name string, max int, sizeOf func(K, V) int) *Cache[K, V] {
	c := &Cache[K, V]{sizeOf: sizeOf, max: max, elems: map[K]*list.Element{}}
	labels := prometheus.Labels{"cache": name}
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_cache_" + n + "_total", Help: help, ConstLabels: labels})
	}
	c.hits = counter("hits", "Lookups a memory cache answered.")
	c.misses = counter("misses", "Lookups a memory cache could not answer.")
	c.evictions = counter("evictions", "Entries a memory cache evicted past its bound.")
	c.held = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "memgate_cache_bytes",
		Help: "Bytes a memory cache accounts for its entries.", ConstLabels: labels},
		func() float64 { _, b := c.Usage(); return float64(b) })
	return c
}

// Collectors returns c's Prometheus collectors: hits, misses, evictions and
// bytes held, labelled with c's name.
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
	c.hits.Inc()
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).val, true
}

// Put keeps v under key, replacing any value held, and evicts least
// recently used entries past the bound. A value larger than the whole
// bound is not kept (and drops what key held).
func (c *Cache[K, V]) Put(key K, v V) {
	size := entryOverhead + c.sizeOf(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.elems[key]; ok {
		c.remove(e)
	}
	if size > c.max {
		return
	}
	c.elems[key] = c.order.PushFront(&entry[K, V]{key: key, val: v, size: size})
	c.bytes += size
	for c.bytes > c.max {
		c.remove(c.order.Back())
		c.evictions.Inc()
	}
}

// Drop removes every entry whose key match reports (visiting them all), so
// that what an erasure erased does not stay in memory until evicted.
func (c *Cache[K, V]) Drop(match func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.elems {
		if match(k) {
			c.remove(e)
		}
	}
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
