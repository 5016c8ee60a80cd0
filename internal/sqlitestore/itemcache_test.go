package sqlitestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestSearchesSeeEveryItemChange searches, by vector and by text, between
// writes that the items the searches return (kept in memory after the
// first search) must follow: a new text, a new time said, a second Store
// writing the same file (another process), and the user's erasure. After
// an erasure nothing of the user comes back, from either search.
func TestSearchesSeeEveryItemChange(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	other := mustOpen(t, path)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	item := func(text string, said time.Time) memory.Item {
		it := vecItem("c1", "a", 1, 0, 0, 0)
		it.Text, it.SaidAt = text, said
		return it
	}
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 10}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "porto", Limit: 10}
	search := func(step string) [2]string {
		t.Helper()
		var out [2]string
		for i, f := range []func(context.Context, memory.ItemQuery) ([]memory.Item, error){s.SearchVector, s.SearchText} {
			q := []memory.ItemQuery{vq, tq}[i]
			items, err := f(ctx, q)
			if err != nil {
				t.Fatalf("%s: search: %v", step, err)
			}
			for _, it := range items {
				out[i] += fmt.Sprintf("%s@%d;", it.Text, it.SaidAt.Unix())
			}
		}
		return out
	}
	want := func(step string, v, txt string) {
		t.Helper()
		// Twice: the second search is answered from memory.
		for range 2 {
			if got := search(step); got != [2]string{v, txt} {
				t.Fatalf("%s: vector search %q, text search %q; want %q, %q", step, got[0], got[1], v, txt)
			}
		}
	}
	t1, t2, t3 := time.Unix(1000, 0), time.Unix(2000, 0), time.Unix(3000, 0)
	must(s.AddItems(ctx, []memory.Item{item("lives in porto", t1)}))
	want("first", "lives in porto@1000;", "lives in porto@1000;")
	must(s.AddItems(ctx, []memory.Item{item("moved to porto", t1)}))
	want("new text", "moved to porto@1000;", "moved to porto@1000;")
	must(s.AddItems(ctx, []memory.Item{item("moved to porto", t2)}))
	want("new time said", "moved to porto@2000;", "moved to porto@2000;")
	must(other.AddItems(ctx, []memory.Item{item("moved to porto again", t3)}))
	want("other store", "moved to porto again@3000;", "moved to porto again@3000;")
	must(other.DeleteUser(ctx, "acme", "alice"))
	want("erased by the other store", "", "")
	// A new item of the erased user, written later, is found, and only it.
	fresh := vecItem("c9", "z", 1, 0, 0, 0)
	fresh.Text, fresh.SaidAt = "porto trip", t3
	must(s.AddItems(ctx, []memory.Item{fresh}))
	want("after the erasure", "porto trip@3000;", "porto trip@3000;")
	must(s.DeleteUser(ctx, "acme", "alice"))
	want("erased", "", "")
}

// TestSearchItemsAreCopies checks a caller changing a returned item, or
// appending to its embedding, does not change what the next search returns.
func TestSearchItemsAreCopies(t *testing.T) {
	ctx := context.Background()
	s, _ := mustTempStore(t)
	if err := s.AddItems(ctx, []memory.Item{vecItem("c1", "a", 1, 0, 0, 0), vecItem("c1", "b", 0.9, 0.1, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 10}
	for i := range 3 {
		items, err := s.SearchVector(ctx, q)
		if err != nil || len(items) != 2 {
			t.Fatalf("search %d: %v, %v", i, items, err)
		}
		if items[0].Ref != "a" || items[0].Text != "text of a" || items[0].Embedding[0] != 1 || len(items[0].Embedding) != 4 || items[0].Score < 0.999 {
			t.Fatalf("search %d: %+v", i, items[0])
		}
		items[0].Text, items[0].Score = "changed", 0
		_ = append(items[0].Embedding, 7) // must not reach the next item's vector
		if items[1].Embedding[0] != 0.9 {
			t.Fatalf("search %d: second embedding %v after an append to the first", i, items[1].Embedding)
		}
	}
}
