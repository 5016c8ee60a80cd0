package sqlitestore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/sqlitestore"
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

// TestSearchVectorSeesEveryChange searches between writes that the vectors
// held in memory must follow: inserts, an upsert that changes a vector, a
// deletion, and writes by a second Store on the same file (another process).
func TestSearchVectorSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	other := mustOpen(t, path)
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 10}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, q memory.ItemQuery, refs ...string) {
		t.Helper()
		if got := searchRefs(t, s.SearchVector, q); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchVector = %v, want %v", step, got, refs)
		}
	}
	want("empty", q)
	must(s.AddItems(ctx, []memory.Item{vecItem("c1", "a", 1, 0, 0, 0), vecItem("c2", "b", 1, 1, 0, 0)}))
	want("first items", q, "a", "b")
	must(s.AddItems(ctx, []memory.Item{vecItem("c1", "c", 1, 0.5, 0, 0)}))
	want("insert", q, "a", "c", "b")
	// An upsert of b with a new vector keeps b's id: the rank must move.
	must(s.AddItems(ctx, []memory.Item{vecItem("c2", "b", 1, 0.1, 0, 0)}))
	want("upsert", q, "a", "b", "c")
	// Another process adds, another connection deletes.
	must(other.AddItems(ctx, []memory.Item{vecItem("c3", "d", 0.9, 0.01, 0, 0)}))
	want("insert by another store", q, "a", "d", "b", "c")
	if _, err := mustRawDB(t, path).ExecContext(ctx, `DELETE FROM memory_items WHERE conversation = 'c1'`); err != nil {
		t.Fatal(err)
	}
	want("delete by another connection", q, "d", "b")
	// Filters apply to the vectors held.
	cq := q
	cq.Conversation = "c2"
	want("conversation", cq, "b")
	xq := q
	xq.ExcludeRefs = []string{"d"}
	want("excluded ref", xq, "b")
	// Other users, models and dimensions are never mixed in.
	bob := vecItem("c1", "e", 1, 0, 0, 0)
	bob.User = "bob"
	other3 := vecItem("c1", "f", 1, 0, 0)
	must(s.AddItems(ctx, []memory.Item{bob, other3}))
	want("scope", q, "d", "b")
	must(s.DeleteUser(ctx, "acme", "alice"))
	want("user deleted", q)
}

// TestSearchVectorScoresMatchCosine checks the scores of the vectors held in
// memory are the cosine similarities.
func TestSearchVectorScoresMatchCosine(t *testing.T) {
	ctx := context.Background()
	s, _ := mustTempStore(t)
	if err := s.AddItems(ctx, []memory.Item{vecItem("c1", "a", 3, 4, 0, 0), vecItem("c1", "z", 0, 0, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	items, err := s.SearchVector(ctx, memory.ItemQuery{Tenant: "acme", User: "alice",
		Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Ref != "a" || items[0].Score < 0.5999 || items[0].Score > 0.6001 {
		t.Fatalf("SearchVector = %+v, want only a with score 0.6 (a zero vector never matches)", items)
	}
}

// TestVectorCacheBounded searches many users' vectors through a Store and
// checks the cache holds no more than its bound, while every search still
// finds the user's own item.
func TestVectorCacheBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := mustTempStore(t)
	const limit = 4000 // about ten users of one small vector
	sqlitestore.SetVectorCacheLimit(s, limit)
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
	n, bytes := sqlitestore.VectorCacheUsage(s)
	if n == 0 || n >= 20 || bytes > limit {
		t.Fatalf("cache holds %d keys, %d bytes; want between 1 and 20 keys within %d bytes", n, bytes, limit)
	}
}
