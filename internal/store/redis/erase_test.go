package redis

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestCacheRefusesWindowsReadBeforeErasure replays the race where a request
// (or the save that refreshes the window) read a conversation from the store
// just before the user was erased and fills the cache just after: the stale
// window must not be cached, while a fresh conversation after the erasure is.
func TestCacheRefusesWindowsReadBeforeErasure(t *testing.T) {
	ctx := context.Background()
	pg := mustPG(t)
	c, rdb := mustCache(t, pg, CacheConfig{Window: 10})
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	ex := memory.Exchange{ID: "ex1", Identity: id, At: time.Now().Add(-time.Second),
		Turn:  []memory.Message{{Role: "user", Content: "I live in Porto and I am vegan"}},
		Reply: memory.Message{Role: "assistant", Content: "Noted"}}
	if _, err := c.SaveExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	stale, err := pg.Recent(ctx, id, 10) // read before the erasure ...
	if err != nil || len(stale) != 2 {
		t.Fatalf("Recent = %d, %v", len(stale), err)
	}
	if err := c.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		t.Fatal(err)
	}
	if err := c.fill(ctx, id, stale); err != nil { // ... cached after it
		t.Fatal(err)
	}
	if n, err := rdb.LLen(ctx, c.listKey(id)).Result(); err != nil || n != 0 {
		t.Fatalf("stale window cached after the erasure: %d messages, %v", n, err)
	}
	if msgs, err := c.Recent(ctx, id, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("Recent after the erasure = %d messages, %v", len(msgs), err)
	}

	// A fresh start is cached as usual.
	fresh := ex
	fresh.ID, fresh.At = "ex2", time.Now()
	fresh.Turn = []memory.Message{{Role: "user", Content: "I moved to Braga"}}
	if res, err := c.SaveExchange(ctx, fresh); err != nil || res.Dropped {
		t.Fatalf("fresh SaveExchange = %+v, %v", res, err)
	}
	if n, err := rdb.LLen(ctx, c.listKey(id)).Result(); err != nil || n != 2 {
		t.Fatalf("fresh window cached: %d messages, %v; want 2", n, err)
	}
	if msgs, err := c.Recent(ctx, id, 10); err != nil || len(msgs) != 2 || msgs[0].Content != "I moved to Braga" {
		t.Fatalf("Recent after a fresh start = %+v, %v", msgs, err)
	}
}
