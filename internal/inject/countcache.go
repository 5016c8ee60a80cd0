package inject

import (
	"encoding/json"
	"hash/maphash"
	"sync"
)

// Bounds of a countCache: texts shorter than countCacheMinBytes are counted
// each time (hashing them costs about as much); each of the countShards
// shards keeps at most two generations of countGeneration counts, so a
// cache holds at most 2*countShards*countGeneration of them (≈ 130,000,
// about 5 MB).
const (
	countCacheMinBytes = 64
	countShards        = 16
	countGeneration    = 4096
)

// countCache is a TokenCounter that remembers the RawMessage and Text counts
// of the texts it has counted, across requests: a warm conversation's stored
// turns, its summary and its recalled passages come back on every request,
// and counting them again was a fifth of a memory-on request's CPU.
//
// A count is a pure function of the model and the text, so a remembered one
// is never stale. Counts are kept by a 128-bit keyed hash of the model and
// the text (two maphash seeds, random per process); no text is kept, so
// nothing of a message — an erased user's included — can be read back from
// the cache: it only answers how many tokens a text the caller already
// holds costs. Each shard keeps the counts of the current and the previous
// generation; a full current generation becomes the previous one, so the
// texts counted lately stay and memory is bounded.
type countCache struct {
	TokenCounter
	seeds  [2]maphash.Seed
	shards [countShards]countShard
}

// countKey is a text's 128-bit hash, its kind (RawMessage or Text) and
// model included.
type countKey [2]uint64

// countShard is one shard of a countCache.
type countShard struct {
	mu       sync.Mutex
	cur, old map[countKey]int
}

// newCountCache returns a countCache over c.
func newCountCache(c TokenCounter) *countCache {
	return &countCache{TokenCounter: c, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// Kinds of counted text, part of the key.
const (
	kindRaw  = 'r'
	kindText = 't'
)

// RawMessage is the wrapped counter's RawMessage, remembered.
func (c *countCache) RawMessage(model string, raw json.RawMessage) int {
	if len(raw) < countCacheMinBytes {
		return c.TokenCounter.RawMessage(model, raw)
	}
	k := c.key(kindRaw, model, "", raw)
	if n, ok := c.get(k); ok {
		return n
	}
	n := c.TokenCounter.RawMessage(model, raw)
	c.put(k, n)
	return n
}

// Text is the wrapped counter's Text, remembered.
func (c *countCache) Text(model, s string) int {
	if len(s) < countCacheMinBytes {
		return c.TokenCounter.Text(model, s)
	}
	k := c.key(kindText, model, s, nil)
	if n, ok := c.get(k); ok {
		return n
	}
	n := c.TokenCounter.Text(model, s)
	c.put(k, n)
	return n
}

// key hashes kind, model and the text (s, or raw when s is empty) with
// each seed.
func (c *countCache) key(kind byte, model, s string, raw []byte) countKey {
	var k countKey
	for i, seed := range c.seeds {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteByte(kind)
		h.WriteString(model)
		h.WriteByte(0)
		h.WriteString(s)
		h.Write(raw)
		k[i] = h.Sum64()
	}
	return k
}

// shard returns k's shard.
func (c *countCache) shard(k countKey) *countShard {
	return &c.shards[k[0]%countShards]
}

// get returns k's remembered count.
func (c *countCache) get(k countKey) (int, bool) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n, ok := sh.cur[k]; ok {
		return n, true
	}
	n, ok := sh.old[k]
	if ok {
		sh.putLocked(k, n) // still in use: keep it past the next rotation
	}
	return n, ok
}

// put remembers k's count.
func (c *countCache) put(k countKey, n int) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.putLocked(k, n)
}

// putLocked adds k to the current generation, rotating a full one out
// first; sh.mu is held.
func (sh *countShard) putLocked(k countKey, n int) {
	if len(sh.cur) >= countGeneration {
		sh.old, sh.cur = sh.cur, nil
	}
	if sh.cur == nil {
		sh.cur = make(map[countKey]int, countGeneration/4)
	}
	sh.cur[k] = n
}

// len is how many counts c holds, for tests.
func (c *countCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.cur) + len(sh.old)
		sh.mu.Unlock()
	}
	return n
}
