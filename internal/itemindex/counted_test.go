package itemindex_test

import (
	"maps"
	"testing"

	"github.com/memgate/memgate/internal/itemindex"
)

// TestCountedCacheAdvance moves a user's entries from one count to the
// next: edited and moved when held at the count the writer started from,
// dropped when held at an older one, left when held at the newer one, and
// nothing created for a user not held.
func TestCountedCacheAdvance(t *testing.T) {
	c := itemindex.NewCountedCache(1<<20, func(k string, v []string) int { return len(k) + 16*len(v) })
	get := func(count int64, keys ...string) map[string][]string {
		t.Helper()
		got, _ := c.Get("acme", "alice", count, keys)
		return got
	}
	put := func(count int64, entries map[string][]string) {
		c.Put("acme", "alice", count, maps.All(entries))
	}
	appendB := func(k string, v []string) ([]string, bool) { return append(v[:len(v):len(v)], "b"), true }
	put(5, map[string][]string{"c1": {"a"}, "c2": {"x"}})
	c.Advance("acme", "alice", 5, 7, []string{"c1", "c3"}, appendB)
	if got := get(7, "c1", "c2", "c3"); len(got) != 2 || len(got["c1"]) != 2 || got["c1"][1] != "b" || got["c2"][0] != "x" {
		t.Fatalf("after Advance from the count held: %q", got)
	}
	if got := get(5, "c1"); got != nil {
		t.Fatalf("the old count still answers: %q", got)
	}
	c.Advance("acme", "alice", 5, 7, []string{"c1"}, appendB) // already at 7
	if got := get(7, "c1"); len(got["c1"]) != 2 {
		t.Fatalf("Advance to the count held changed it: %q", got)
	}
	c.Advance("acme", "alice", 8, 9, []string{"c1"}, appendB) // held at 7, older than 8
	if got := get(7, "c1"); got != nil {
		t.Fatalf("stale entries kept: %q", got)
	}
	if got := get(9, "c1"); got != nil {
		t.Fatalf("stale entries moved: %q", got)
	}
	put(10, map[string][]string{"c1": {"a"}})
	c.Advance("acme", "alice", 10, 12, []string{"c1"}, func(string, []string) ([]string, bool) { return nil, false })
	if got := get(12, "c1"); got == nil || len(got) != 0 {
		t.Fatalf("entry edit dropped: %q", got)
	}
	c.Forget("acme", "alice")
	if got := get(12, "c1"); got != nil {
		t.Fatalf("after Forget: %q", got)
	}
	c.Advance("acme", "bob", 0, 3, []string{"c1"}, appendB)
	if got, _ := c.Get("acme", "bob", 3, []string{"c1"}); got != nil {
		t.Fatalf("Advance of a user not held: %q", got)
	}
}

// TestCountedCacheLookupSet: Set keeps one entry as Put does and Lookup
// answers it only at its count, for its user, and not after a newer count.
func TestCountedCacheLookupSet(t *testing.T) {
	c := itemindex.NewCountedCache(1<<20, func(k string, v int) int { return len(k) + 8 })
	c.Set("acme", "alice", 3, "c1", 10)
	tests := []struct {
		name     string
		user     string
		count    int64
		key      string
		want     int
		wantHeld bool
	}{
		{"held", "alice", 3, "c1", 10, true},
		{"another count", "alice", 4, "c1", 0, false},
		{"another key", "alice", 3, "c2", 0, false},
		{"another user", "bob", 3, "c1", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, held := c.Lookup("acme", tt.user, tt.count, tt.key); got != tt.want || held != tt.wantHeld {
				t.Fatalf("Lookup = %d, %v; want %d, %v", got, held, tt.want, tt.wantHeld)
			}
		})
	}
	c.Set("acme", "alice", 5, "c2", 20)
	if _, held := c.Lookup("acme", "alice", 3, "c1"); held {
		t.Fatal("an entry of an older count answered after a newer Set")
	}
	if got, held := c.Lookup("acme", "alice", 5, "c2"); !held || got != 20 {
		t.Fatalf("Lookup after the newer Set = %d, %v", got, held)
	}
}
