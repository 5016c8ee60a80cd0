package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// Tombstones reaches a store's conversation tombstones, which the contract
// does not expose: Age moves every one of them back by, and Count counts
// them.
type Tombstones struct {
	Age   func(ctx context.Context, by time.Duration) error
	Count func(ctx context.Context) (int, error)
}

// TombstoneStore is a Store that expires the tombstones of conversations
// never stored.
type TombstoneStore interface {
	Store
	ExpireTombstones(ctx context.Context, before time.Time) (int, error)
}

// RunTombstoneExpiry runs the tombstone-expiry contract: the tombstone of
// a conversation deleted while it was not stored (an id nobody used, or
// one whose turns were all still queued) refuses what was received before
// the deletion until ExpireTombstones is called with a time after it
// (memory.TombstoneHorizon), then goes, contract.UnstoredTombstonePrune at
// each call, so deleting ids that were never stored does not grow the
// table without bound; the tombstone of a conversation that was stored
// stays, also when the conversation was deleted unstored first.
func RunTombstoneExpiry(t *testing.T, open func(t *testing.T) (TombstoneStore, Tombstones)) {
	t.Helper()
	t.Run("UnstoredTombstonesExpire", func(t *testing.T) {
		s, tombs := open(t)
		testUnstoredTombstonesExpire(t, s, tombs)
	})
}

func testUnstoredTombstonesExpire(t *testing.T, s TombstoneStore, tombs Tombstones) {
	ctx := testCtx(t)
	alice := func(conv string) memory.Identity {
		return memory.Identity{Tenant: "acme", User: "alice", Conversation: conv}
	}
	del := func(id memory.Identity, stored bool) {
		t.Helper()
		err := s.DeleteConversation(ctx, id)
		if stored && err != nil || !stored && !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("DeleteConversation(%s) = %v (stored: %v)", id.Conversation, err, stored)
		}
	}
	// expire runs ExpireTombstones at the horizon of an empty queue, as
	// the engine does after a deletion.
	expire := func() int {
		t.Helper()
		n, err := s.ExpireTombstones(ctx, memory.TombstoneHorizon(time.Now(), time.Time{}))
		if err != nil {
			t.Fatalf("ExpireTombstones: %v", err)
		}
		return n
	}
	deleted := func(id memory.Identity) bool {
		t.Helper()
		at, err := s.DeletedAt(ctx, id)
		if err != nil {
			t.Fatalf("DeletedAt(%s): %v", id.Conversation, err)
		}
		return !at.IsZero()
	}
	count := func() int {
		t.Helper()
		n, err := tombs.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Stored, then deleted.
	mustSave(t, s, simple(t, alice("kept"), 1))
	del(alice("kept"), true)
	// Deleted unstored, then stored by a turn received after, then
	// deleted again: a conversation that was stored.
	del(alice("restarted"), false)
	ex := simple(t, alice("restarted"), 1)
	ex.At, ex.Received = time.Now(), time.Now()
	mustSave(t, s, ex)
	del(alice("restarted"), true)
	// Ids never stored, more than one deletion prunes.
	ghosts := 3 * contract.UnstoredTombstonePrune
	for i := range ghosts {
		del(alice(fmt.Sprintf("ghost-%d", i)), false)
	}
	if n := count(); n != ghosts+2 {
		t.Fatalf("%d tombstones, want %d", n, ghosts+2)
	}
	// Within its life an unstored tombstone refuses a turn received before
	// the deletion.
	if err := tombs.Age(ctx, memory.UnstoredTombstoneLife-time.Hour); err != nil {
		t.Fatal(err)
	}
	del(alice("fresh-ghost"), false)
	if n := expire(); n != 0 {
		t.Fatalf("ExpireTombstones deleted %d tombstones within their life", n)
	}
	if !deleted(alice("ghost-0")) {
		t.Fatal("a tombstone of a conversation never stored went before its life was over")
	}
	late := simple(t, alice("ghost-0"), 1)
	late.Received = time.Now().Add(-memory.UnstoredTombstoneLife)
	if res, err := s.SaveExchange(ctx, late); err != nil || !res.Dropped {
		t.Fatalf("a turn received before the deletion = %+v, %v; want it dropped", res, err)
	}

	// Past their life the unstored tombstones go, a few at each call.
	if err := tombs.Age(ctx, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := range ghosts/contract.UnstoredTombstonePrune + 1 {
		del(alice(fmt.Sprintf("new-ghost-%d", i)), false)
		if n := expire(); n > contract.UnstoredTombstonePrune {
			t.Fatalf("one ExpireTombstones deleted %d tombstones, more than %d", n, contract.UnstoredTombstonePrune)
		}
	}
	if deleted(alice("ghost-0")) {
		t.Fatal("a tombstone of a conversation never stored outlived its life")
	}
	for _, conv := range []string{"kept", "restarted", "fresh-ghost", "new-ghost-0"} {
		if !deleted(alice(conv)) {
			t.Fatalf("the tombstone of %s went", conv)
		}
	}
	if n, want := count(), 2+1+ghosts/contract.UnstoredTombstonePrune+1; n != want {
		t.Fatalf("%d tombstones left, want %d (the stored ones, and the unstored ones within their life)", n, want)
	}
}
