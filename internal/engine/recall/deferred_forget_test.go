package recall

import (
	"context"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// TestBackfillEmbedsNothingOfADeletedConversation: what indexing left
// for Backfill of a conversation deleted since waits no longer in memory,
// and is not sent to the embedder, once the deletion's Forget reaches the
// Deferred (as cache.Reads.Forget does in every process its notice
// reaches): its vectors would go to the embedding provider, and into the
// cache the deletion emptied, for writes the store then skips. Another
// user's deferred items are embedded.
func TestBackfillEmbedsNothingOfADeletedConversation(t *testing.T) {
	t.Parallel() // its own SQLite file
	ctx := context.Background()
	st := openTempSQLite(t)
	vectors, deferred := NewEmbeddingCache(DefaultEmbeddingBytes), NewDeferred()
	ix := NewIndexer(st, NewCached(NewLocal(16), vectors, nil), nil)
	ix.UseDeferred(deferred)
	gone := memory.Identity{Tenant: "t", User: "gone", Conversation: "c"}
	kept := memory.Identity{Tenant: "t", User: "kept", Conversation: "c"}
	for _, id := range []memory.Identity{gone, kept} {
		saveIndexed(t, st, ix, longHistory(id, "e-"+id.User, erasureHistory))
	}
	mustDeferMessage3(t, ix, gone, kept)
	if err := st.DeleteConversation(ctx, gone); err != nil {
		t.Fatal(err)
	}
	cache.Forgetters{vectors, deferred}.Forget(gone.Tenant, gone.User) // as the deletion does
	deferred.mu.Lock()
	for _, it := range deferred.items {
		if it.User == gone.User {
			deferred.mu.Unlock()
			t.Fatalf("an item of the deleted conversation still waits for Backfill: %q", it.Text)
		}
	}
	deferred.mu.Unlock()
	backfillAll(t, ix)
	owners := map[string]int{}
	vectors.Drop(func(k EmbeddingKey) bool { owners[k.User]++; return false })
	if owners[gone.User] > 0 {
		t.Fatalf("%d texts of the deleted conversation embedded after its deletion", owners[gone.User])
	}
	if owners[kept.User] == 0 {
		t.Fatal("the other user's deferred items were not embedded")
	}

	// A round that read its items before a forget keeps none of them.
	epoch := deferred.epoch()
	deferred.Forget(gone.Tenant, gone.User)
	items := []memory.Item{{Tenant: "t", User: "gone", Conversation: "c", Kind: "message", Ref: "m", Text: "read before"}}
	if n := deferred.push(epoch, items); n != 1 || ix.Deferred() != 0 {
		t.Fatalf("a round begun before the forget kept %d of its items (dropped %d)", ix.Deferred(), n)
	}
}

// TestDeferredKeepsOtherUsersItems: a round's items of a user forgotten
// since it began are not kept, but the other users' are, whoever else
// was forgotten meanwhile (another tenant's deletion of a conversation,
// even of one that does not exist): they would wait for `gateway
// reindex` for their vectors.
func TestDeferredKeepsOtherUsersItems(t *testing.T) {
	d := NewDeferred()
	epoch := d.epoch()
	d.Forget("other-tenant", "someone-else")
	d.Forget("t", "gone")
	items := []memory.Item{
		{Tenant: "t", User: "kept", Conversation: "c", Kind: KindMessage, Ref: "m1", Text: "older"},
		{Tenant: "t", User: "gone", Conversation: "c", Kind: KindMessage, Ref: "m2", Text: "read before the forget"},
		{Tenant: "t", User: "kept", Conversation: "c", Kind: KindMessage, Ref: "m3", Text: "newer"},
	}
	if n := d.push(epoch, items); n != 1 {
		t.Fatalf("push left %d items, want 1 (the forgotten user's)", n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var kept []string
	for _, it := range d.items {
		if it.User != "kept" {
			t.Fatalf("the forgotten user's item %q kept", it.Text)
		}
		kept = append(kept, it.Text)
	}
	if len(kept) != 2 {
		t.Fatalf("user kept's items kept: %q, want both", kept)
	}
}

// TestDeferredKeepsItsItemsOnAClear: a clear (the erasure notices'
// subscription starting or reconnecting) drops none of the items
// waiting, nor those of a round begun before it: dropped, they would
// stay without a vector until `gateway reindex`.
func TestDeferredKeepsItsItemsOnAClear(t *testing.T) {
	d := NewDeferred()
	item := func(ref string) memory.Item {
		return memory.Item{Tenant: "t", User: "ana", Conversation: "c", Kind: KindMessage, Ref: ref, Text: "text of " + ref}
	}
	if n := d.push(d.epoch(), []memory.Item{item("m1")}); n != 0 {
		t.Fatalf("push left %d items", n)
	}
	epoch := d.epoch() // a round begins
	d.Clear()
	if n := d.push(epoch, []memory.Item{item("m2")}); n != 0 {
		t.Fatalf("a round begun before a clear left %d items", n)
	}
	if got := d.pop(backfillBatch); len(got) != 2 {
		t.Fatalf("%d items waiting after a clear, want 2", len(got))
	}
}
