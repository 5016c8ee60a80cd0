package storetest

import (
	"bytes"
	"context"
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
