package cache_test

import (
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
)

// clock is a settable clock for ExpireAfter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestExpireAfter: an entry of an age-bounded cache is served until its
// age reaches the bound, then not (and dropped); a Put past an age drops
// every expired entry, read or not; an unbounded cache keeps its entries.
func TestExpireAfter(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	c := newCache(1<<20).ExpireAfter(10*time.Minute, clk.now)
	c.Put(key{"alice", 0, 1}, "old")
	clk.t = clk.t.Add(6 * time.Minute)
	c.Put(key{"alice", 0, 2}, "newer")
	tests := []struct {
		name    string
		advance time.Duration
		k       key
		held    bool
	}{
		{"young", 3 * time.Minute, key{"alice", 0, 1}, true}, // 9 min old
		{"at the bound", time.Minute, key{"alice", 0, 1}, false},
		{"the newer one, younger", 0, key{"alice", 0, 2}, true}, // 4 min old
		{"the newer one at the bound", 6 * time.Minute, key{"alice", 0, 2}, false},
	}
	for _, tt := range tests {
		clk.t = clk.t.Add(tt.advance)
		if _, held := c.Get(tt.k); held != tt.held {
			t.Fatalf("%s: Get(%v) held %v; want %v", tt.name, tt.k, held, tt.held)
		}
	}
	if n, _ := c.Usage(); n != 0 {
		t.Fatalf("%d entries held after both expired and were read", n)
	}

	// Entries never read again are dropped by the first Put an age later.
	c.Put(key{"bob", 0, 1}, "unread")
	c.Put(key{"bob", 0, 2}, "unread too")
	clk.t = clk.t.Add(10 * time.Minute)
	c.Put(key{"carol", 0, 1}, "fresh")
	if n, bytes := c.Usage(); n != 1 || bytes != 128+len("fresh") {
		t.Fatalf("after a Put an age later: %d entries, %d bytes; want only the fresh one", n, bytes)
	}

	plain := newCache(1 << 20)
	plain.Put(key{"alice", 0, 1}, "kept")
	clk.t = clk.t.Add(24 * time.Hour) // not plain's clock: it has none
	if _, held := plain.Get(key{"alice", 0, 1}); !held {
		t.Fatal("a cache without an age bound dropped an entry")
	}
}

// BenchmarkGet measures a hit, without and with an age bound.
func BenchmarkGet(b *testing.B) {
	for _, bc := range []struct {
		name string
		c    *cache.Cache[key, string]
	}{
		{"plain", newCache(1 << 20)},
		{"aged", newCache(1<<20).ExpireAfter(time.Hour, time.Now)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := range 64 {
				bc.c.Put(key{"alice", 1, i}, "value")
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, ok := bc.c.Get(key{"alice", 1, i & 63}); !ok {
					b.Fatal("miss")
				}
			}
		})
	}
}
