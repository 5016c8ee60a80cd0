package itemindex

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// cacheItems returns items of the user with the given ids, each of
// itemSize 160+len(text)+16 (a 4-dimension embedding).
func cacheItems(user string, ids ...int64) []memory.Item {
	items := make([]memory.Item, len(ids))
	for i, id := range ids {
		items[i] = memory.Item{ID: id, Tenant: "acme", User: user, Text: fmt.Sprintf("item %04d", id),
			Embedding: []float32{1, 0, 0, 0}, Score: 0.5}
	}
	return items
}

// itemBytes is what the cache accounts for the user holding items.
func itemBytes(items []memory.Item) int {
	n := slotOverhead
	for _, it := range items {
		n += itemSize(it)
	}
	return n
}

// heldIDs returns the ids of ids the cache answers for user at changed,
// sorted, or nil when it answers nothing at that count; it checks the ids
// it answers and the missing ones make up ids.
func heldIDs(t *testing.T, c *itemCache, user string, changed int64, ids ...int64) []int64 {
	t.Helper()
	got, missing := c.Get("acme", user, changed, ids)
	if len(got)+len(missing) != len(ids) {
		t.Fatalf("get(%s, %d, %v): %d held, missing %v", user, changed, ids, len(got), missing)
	}
	if got == nil {
		return nil
	}
	held := []int64{}
	for id, it := range got {
		if it.ID != id || it.User != user || it.Score != 0 {
			t.Fatalf("get(%s, %d): item %d is %+v", user, changed, id, it)
		}
		held = append(held, id)
	}
	slices.Sort(held)
	return held
}

func usage(c *itemCache) (users, bytes int) { return c.users.usage() }

// TestItemCacheCounts checks a user's items are answered only at the count
// they were kept at, a newer count replaces them and an older one is
// ignored, and the bytes accounted follow the items held.
func TestItemCacheCounts(t *testing.T) {
	c := newItemCache(1 << 20)
	c.put("acme", "alice", 5, cacheItems("alice", 1, 2))
	if got := heldIDs(t, c, "alice", 5, 1, 2, 3); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("at 5: %v", got)
	}
	for _, changed := range []int64{4, 6} {
		if got := heldIDs(t, c, "alice", changed, 1, 2); got != nil {
			t.Fatalf("at %d: %v, want nothing", changed, got)
		}
	}
	// Kept again and grown at the same count: each item accounted once.
	c.put("acme", "alice", 5, cacheItems("alice", 2, 3))
	if _, bytes := usage(c); bytes != itemBytes(cacheItems("alice", 1, 2, 3)) {
		t.Fatalf("grown: %d bytes, want %d", bytes, itemBytes(cacheItems("alice", 1, 2, 3)))
	}
	// Read at an older count: not kept over the newer.
	c.put("acme", "alice", 4, cacheItems("alice", 9))
	if got := heldIDs(t, c, "alice", 5, 1, 2, 3, 9); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("after an older put: %v", got)
	}
	// A newer count drops what the older one held.
	c.put("acme", "alice", 7, cacheItems("alice", 3))
	if got := heldIDs(t, c, "alice", 7, 1, 2, 3); !slices.Equal(got, []int64{3}) {
		t.Fatalf("at 7: %v", got)
	}
	if got := heldIDs(t, c, "alice", 5, 1, 2, 3); got != nil {
		t.Fatalf("at 5 after 7: %v", got)
	}
	if _, bytes := usage(c); bytes != itemBytes(cacheItems("alice", 3)) {
		t.Fatalf("replaced: %d bytes, want %d", bytes, itemBytes(cacheItems("alice", 3)))
	}
}

// TestItemCacheEvictsLeastRecentlySearched fills an item cache bounded at
// two users' items with a third, and checks the user searched least
// recently is the one evicted, the bytes stay within the bound, and a user
// whose items alone exceed it is not kept.
func TestItemCacheEvictsLeastRecentlySearched(t *testing.T) {
	one := itemBytes(cacheItems("x", 1, 2, 3))
	c := newItemCache(2*one + one/2)
	c.put("acme", "alice", 1, cacheItems("alice", 1, 2, 3))
	c.put("acme", "bob", 1, cacheItems("bob", 1, 2, 3))
	heldIDs(t, c, "alice", 1, 1) // alice searched after bob
	c.put("acme", "carol", 1, cacheItems("carol", 1, 2, 3))
	for _, tc := range []struct {
		user string
		want []int64
	}{
		{"alice", []int64{1, 2, 3}},
		{"bob", nil},
		{"carol", []int64{1, 2, 3}},
	} {
		if got := heldIDs(t, c, tc.user, 1, 1, 2, 3); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.user, got, tc.want)
		}
	}
	if _, bytes := usage(c); bytes > c.users.max {
		t.Fatalf("%d bytes past the bound %d", bytes, c.users.max)
	}

	var big []int64
	for id := int64(1); itemBytes(cacheItems("dave", big...)) <= c.users.max; id++ {
		big = append(big, id)
	}
	c.put("acme", "dave", 1, cacheItems("dave", big...))
	if got := heldIDs(t, c, "dave", 1, big...); len(got) != 0 {
		t.Fatalf("dave, past the bound alone: %d items held", len(got))
	}
	if got := heldIDs(t, c, "carol", 1, 1, 2, 3); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("carol after dave: %v", got)
	}
	if users, bytes := usage(c); bytes > c.users.max || bytes < itemBytes(cacheItems("carol", 1, 2, 3)) {
		t.Fatalf("%d users, %d bytes; bound %d", users, bytes, c.users.max)
	}
}
