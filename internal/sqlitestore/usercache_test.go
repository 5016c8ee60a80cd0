package sqlitestore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestSearchTextSeesEveryChange searches between writes that the text index
// held in memory must follow: inserts, an upsert that changes a text, a
// deletion, writes by a second Store and another connection on the same file, and
// the user's erasure.
func TestSearchTextSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	other := mustOpen(t, path)
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "porto", Limit: 10}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	item := func(conv, ref, text string) memory.Item {
		return memory.Item{Tenant: "acme", User: "alice", Conversation: conv, Kind: "message", Ref: ref, Text: text}
	}
	want := func(step string, refs ...string) {
		t.Helper()
		if got := searchRefs(t, s.SearchText, q); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchText = %v, want %v", step, got, refs)
		}
	}
	want("empty")
	must(s.AddItems(ctx, []memory.Item{item("c1", "a", "porto porto porto"), item("c2", "b", "lisbon then porto and more words")}))
	want("first items", "a", "b")
	// An upsert of b with a new text keeps b's id: the index must follow.
	must(s.AddItems(ctx, []memory.Item{item("c2", "b", "lisbon only")}))
	want("upsert", "a")
	must(other.AddItems(ctx, []memory.Item{item("c3", "d", "porto wine")}))
	want("insert by another store", "a", "d")
	_, err := mustRawDB(t, path).ExecContext(ctx, `DELETE FROM memory_items WHERE conversation = 'c1'`)
	must(err)
	want("delete by another connection", "d")
	must(s.DeleteUser(ctx, "acme", "alice"))
	want("user erased")
}

// TestErasedUserNeverComesBackFromACache warms both in-memory caches of one
// Store (vectors and text index), erases the user through a second Store on
// the same file (another process), and checks neither cache answers with
// the erased items, nor with them beside new ones written after the
// erasure, while a bystander's cached items stay searchable.
func TestErasedUserNeverComesBackFromACache(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	other := mustOpen(t, path)
	item := func(user, ref, text string) memory.Item {
		return memory.Item{Tenant: "acme", User: user, Conversation: "c1", Kind: "message", Ref: ref, Text: text,
			Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4}
	}
	vq := func(user string) memory.ItemQuery {
		return memory.ItemQuery{Tenant: "acme", User: user, Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Limit: 10}
	}
	tq := func(user string) memory.ItemQuery {
		return memory.ItemQuery{Tenant: "acme", User: user, Text: "porto", Limit: 10}
	}
	check := func(step, user string, refs ...string) {
		t.Helper()
		if got := searchRefs(t, s.SearchVector, vq(user)); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchVector(%s) = %v, want %v", step, user, got, refs)
		}
		if got := searchRefs(t, s.SearchText, tq(user)); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchText(%s) = %v, want %v", step, user, got, refs)
		}
	}
	if err := s.AddItems(ctx, []memory.Item{item("alice", "a1", "porto"), item("alice", "a2", "porto"), item("bob", "b1", "porto")}); err != nil {
		t.Fatal(err)
	}
	check("cached", "alice", "a1", "a2")
	check("cached", "bob", "b1")
	if err := other.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	check("erased by another store", "alice")
	check("bystander", "bob", "b1")
	// As many items as before come back after the erasure: the cache must
	// not take them for the ones it held.
	if err := other.AddItems(ctx, []memory.Item{item("alice", "n1", "porto"), item("alice", "n2", "porto")}); err != nil {
		t.Fatal(err)
	}
	check("written after the erasure", "alice", "n1", "n2")
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	check("erased again", "alice")
}
