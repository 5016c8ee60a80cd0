package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

// vecItem is an item of acme/alice with a 4-dimension vector.
func vecItem(conv, ref string, v ...float32) memory.Item {
	return memory.Item{Tenant: "acme", User: "alice", Conversation: conv, Kind: "message", Ref: ref,
		Text: "text of " + ref, Embedding: v, Model: "m", Dims: len(v)}
}

// searchRefs runs search (a Store's SearchVector or SearchText) for q and
// returns the refs found, best first.
func searchRefs(t *testing.T, search func(context.Context, memory.ItemQuery) ([]memory.Item, error), q memory.ItemQuery) []string {
	t.Helper()
	items, err := search(context.Background(), q)
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	refs := make([]string, len(items))
	for i, it := range items {
		refs[i] = it.Ref
	}
	return refs
}

func TestFreshnessContract(t *testing.T) {
	storetest.RunFreshness(t, func(t *testing.T) storetest.Replicas {
		s, path := mustTempStore(t)
		db := mustRawDB(t, path)
		return storetest.Replicas{Mine: storetest.Cached(s), Other: mustOpen(t, path), Exec: func(ctx context.Context, sql string) error {
			_, err := db.ExecContext(ctx, sql)
			return err
		}}
	})
}

// TestVectorCacheBounded searches many users' vectors through a Store and
// checks the cache holds no more than its bound, while every search still
// finds the user's own item.
func TestVectorCacheBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := mustTempStore(t)
	const limit = 4000 // about ten users of one small vector
	sqlite.SetVectorCacheLimit(s, limit)
	var items []memory.Item
	for u := range 50 {
		it := vecItem("c", "r", 1, float32(u), 0, 0)
		it.User = fmt.Sprintf("user%d", u)
		items = append(items, it)
	}
	if err := s.AddItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	for u := range 50 {
		q := memory.ItemQuery{Tenant: "acme", User: fmt.Sprintf("user%d", u), Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 3}
		if got := searchRefs(t, s.SearchVector, q); !slices.Equal(got, []string{"r"}) {
			t.Fatalf("user%d: SearchVector = %v, want [r]", u, got)
		}
	}
	n, bytes := sqlite.VectorCacheUsage(s)
	if n == 0 || n >= 20 || bytes > limit {
		t.Fatalf("cache holds %d keys, %d bytes; want between 1 and 20 keys within %d bytes", n, bytes, limit)
	}
}

func TestSaveTailsContract(t *testing.T) {
	storetest.RunSaveTails(t, func(t *testing.T) storetest.Revisioned {
		s, _ := mustTempStore(t)
		return s
	})
}

// TestErasureEmptiesTheRecallCaches checks that a user's vectors held in
// memory go with their erasure, and with a deleted conversation of theirs.
func TestErasureEmptiesTheRecallCaches(t *testing.T) {
	ctx := context.Background()
	s, _ := mustTempStore(t)
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	if _, err := s.SaveExchange(ctx, memory.Exchange{ID: "x1", Identity: c1, Turn: []memory.Message{{Role: "user", Content: "hi"}},
		Reply: memory.Message{Role: "assistant", Content: "hello"}}); err != nil {
		t.Fatal(err)
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 5}
	for _, erase := range []func() error{
		func() error {
			return s.DeleteConversation(ctx, memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"})
		},
		func() error { return s.DeleteUser(ctx, "acme", "alice") },
	} {
		if err := s.AddItems(ctx, []memory.Item{vecItem("c1", "r1", 1, 0, 0, 0)}); err != nil {
			t.Fatal(err)
		}
		searchRefs(t, s.SearchVector, q)
		if keys, _ := sqlite.VectorCacheUsage(s); keys != 1 {
			t.Fatalf("vector sets held after a search = %d, want 1", keys)
		}
		if err := erase(); err != nil {
			t.Fatal(err)
		}
		if keys, _ := sqlite.VectorCacheUsage(s); keys != 0 {
			t.Fatalf("vector sets held after the erasure = %d, want 0", keys)
		}
	}
}
