package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// PurgeLedger is a store that keeps the queue purges not known to be
// done (memory.PendingPurge).
type PurgeLedger interface {
	AddPendingPurge(ctx context.Context, p memory.PendingPurge) error
	PendingPurges(ctx context.Context, limit int) ([]memory.PendingPurge, error)
	DonePurges(ctx context.Context, ps []memory.PendingPurge) error
}

// RunPendingPurges runs the pending purges contract: a purge recorded is
// listed, oldest first, up to the limit, keyed by its digest alone, at
// the later of the times it was recorded at; marking it done at a time
// removes it unless it was recorded again at a later one (a later
// erasure, whose purge is still to do), and survives reopening is the
// stores' own (the rows are in the database).
func RunPendingPurges(t *testing.T, open func(t *testing.T) PurgeLedger) {
	t.Helper()
	t.Run("PendingPurges", func(t *testing.T) {
		s := open(t)
		ctx := testCtx(t)
		at := time.Now().UTC().Truncate(time.Microsecond)
		alice := memory.PendingPurge{Key: memory.UserTombstone("acme", "alice"), At: at}
		conv := memory.PendingPurge{Key: memory.ConversationTombstone(memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}),
			Conversation: true, At: at.Add(-time.Minute)}
		for _, p := range []memory.PendingPurge{alice, conv, {Key: alice.Key, At: at.Add(-time.Hour)}} {
			if err := s.AddPendingPurge(ctx, p); err != nil {
				t.Fatalf("AddPendingPurge: %v", err)
			}
		}
		list := func(limit int) []memory.PendingPurge {
			t.Helper()
			ps, err := s.PendingPurges(ctx, limit)
			if err != nil {
				t.Fatalf("PendingPurges: %v", err)
			}
			return ps
		}
		same := func(a, b memory.PendingPurge) bool {
			return bytes.Equal(a.Key, b.Key) && a.Conversation == b.Conversation && a.At.Equal(b.At)
		}
		if ps := list(10); len(ps) != 2 || !same(ps[0], conv) || !same(ps[1], alice) {
			t.Fatalf("pending purges = %+v; want bob's conversation's, then alice's at its later time", ps)
		}
		if ps := list(1); len(ps) != 1 || !same(ps[0], conv) {
			t.Fatalf("pending purges, limit 1 = %+v; want the oldest", ps)
		}
		later := alice
		later.At = at.Add(time.Minute)
		if err := s.AddPendingPurge(ctx, later); err != nil {
			t.Fatal(err)
		}
		if err := s.DonePurges(ctx, []memory.PendingPurge{alice, conv}); err != nil {
			t.Fatalf("DonePurges: %v", err)
		}
		if ps := list(10); len(ps) != 1 || !same(ps[0], later) {
			t.Fatalf("pending purges after the first two were done = %+v; want alice's later one", ps)
		}
		if err := s.DonePurges(ctx, []memory.PendingPurge{later}); err != nil {
			t.Fatal(err)
		}
		if ps := list(10); len(ps) != 0 {
			t.Fatalf("pending purges once all were done = %+v; want none", ps)
		}
	})
}

// ErasingLedger is a PurgeLedger whose erasures and conversation
// deletions owe the queues a purge.
type ErasingLedger interface {
	Store
	PurgeLedger
}

// RunErasurePurges runs the contract that an erasure's tombstone and its
// pending purge are one write: once DeleteUser returns, the ledger lists
// the purge of the user's queued turns (UserTombstone, at ErasedAt), and
// once DeleteConversation returns, stored or not (memory.ErrNotFound),
// the purge of the conversation's (ConversationTombstone, at DeletedAt),
// so that no process stopping between the two leaves a tombstone whose
// queued turns nobody purges. Erasing again moves the purge to its own
// time; a purge done is listed no more.
func RunErasurePurges(t *testing.T, open func(t *testing.T) ErasingLedger) {
	t.Helper()
	t.Run("ErasureOwesPurge", func(t *testing.T) {
		s := open(t)
		ctx := testCtx(t)
		listed := func(what string, want ...memory.PendingPurge) {
			t.Helper()
			ps, err := s.PendingPurges(ctx, 10)
			if err != nil {
				t.Fatalf("%s: PendingPurges: %v", what, err)
			}
			ok := len(ps) == len(want)
			for i := 0; ok && i < len(ps); i++ {
				ok = bytes.Equal(ps[i].Key, want[i].Key) && ps[i].Conversation == want[i].Conversation && ps[i].At.Equal(want[i].At)
			}
			if !ok {
				t.Fatalf("%s: pending purges = %+v; want %+v", what, ps, want)
			}
		}
		erase := func() memory.PendingPurge {
			t.Helper()
			if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
				t.Fatalf("DeleteUser: %v", err)
			}
			at, err := s.ErasedAt(ctx, "acme", "alice")
			if err != nil || at.IsZero() {
				t.Fatalf("ErasedAt = %v, %v; want the erasure's time", at, err)
			}
			return memory.PendingPurge{Key: memory.UserTombstone("acme", "alice"), At: at}
		}
		first := erase()
		listed("after an erasure", first)
		second := erase()
		if !second.At.After(first.At) {
			t.Fatalf("the second erasure is dated %v, not after the first's %v", second.At, first.At)
		}
		listed("after a second erasure", second)

		stored := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
		mustSave(t, s, simple(t, stored, 1))
		unstored := memory.Identity{Tenant: "acme", User: "bob", Conversation: "never"}
		deleted := func(id memory.Identity) memory.PendingPurge {
			t.Helper()
			if err := s.DeleteConversation(ctx, id); err != nil && !errors.Is(err, memory.ErrNotFound) {
				t.Fatalf("DeleteConversation(%s): %v", id.Conversation, err)
			}
			at, err := s.DeletedAt(ctx, id)
			if err != nil || at.IsZero() {
				t.Fatalf("DeletedAt(%s) = %v, %v; want the deletion's time", id.Conversation, at, err)
			}
			return memory.PendingPurge{Key: memory.ConversationTombstone(id), Conversation: true, At: at}
		}
		c1 := deleted(stored)
		never := deleted(unstored)
		listed("after deleting a stored conversation and one never stored", second, c1, never)

		if err := s.DonePurges(ctx, []memory.PendingPurge{second, c1, never}); err != nil {
			t.Fatalf("DonePurges: %v", err)
		}
		listed("once the purges were done")
	})
}
