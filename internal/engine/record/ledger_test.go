package record

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var (
	_ PurgeLedger = (*sqlite.Store)(nil)
	_ PurgeLedger = (*memLedger)(nil)
)

// TestMemLedgerContract: a Capturer without a store keeps its pending
// purges as a store does (storetest.RunPendingPurges), in memory.
func TestMemLedgerContract(t *testing.T) {
	storetest.RunPendingPurges(t, func(t *testing.T) storetest.PurgeLedger {
		return newMemLedger(func(n int) { t.Errorf("%d purges given up below the bound", n) })
	})
}

// downPurges is a queue whose purges fail while down (a Redis that does
// not answer), everything else going through.
type downPurges struct {
	Queue
	down *atomic.Bool
}

func (q downPurges) Purge(ctx context.Context, match func([]byte) bool) (int, error) {
	if q.down.Load() {
		return 0, memory.ErrUnavailable
	}
	return q.Queue.Purge(ctx, match)
}

// TestMemLedgerBound: past maxPendingPurges the memory ledger gives up
// the oldest purge, and says how many it gave up.
func TestMemLedgerBound(t *testing.T) {
	ctx := context.Background()
	gone := 0
	l := newMemLedger(func(n int) { gone += n })
	start := time.Now()
	for i := range maxPendingPurges + 1 {
		p := memory.PendingPurge{Key: memory.UserTombstone("acme", fmt.Sprint("u", i)), At: start.Add(time.Duration(i) * time.Second)}
		if err := l.AddPendingPurge(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ps, _ := l.PendingPurges(ctx, 1)
	if gone != 1 || len(ps) != 1 || !bytes.Equal(ps[0].Key, memory.UserTombstone("acme", "u1")) {
		t.Fatalf("gave up %d, oldest left %+v; want u0 given up, u1 the oldest", gone, ps)
	}
}

// TestPendingPurgeOutlivesTheProcess: an erasure's and a deletion's
// purges the queue does not take are recorded in the store (Ledger); the
// process stops with them pending (given up), and the next process over
// the same store and queue — a restart — purges the erased user's and
// the deleted conversation's turns at start, leaving the others' queued,
// and records them done (nothing listed any more). The store holds the
// purges by digest only: no id in the clear.
func TestPendingPurgeOutlivesTheProcess(t *testing.T) {
	ctx := context.Background()
	st := mustSQLite(t)
	erasedAt := time.Now()
	enqueue := func(id memory.Identity, text string) {
		t.Helper()
		e := exchange(t, "x-"+id.User+id.Conversation, text, "Noted")
		e.Identity, e.At, e.Received = id, erasedAt.Add(-time.Hour), erasedAt.Add(-time.Hour)
		if err := st.Outbox().Enqueue(ctx, must(json.Marshal(e))); err != nil {
			t.Fatal(err)
		}
	}
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bobGone := memory.Identity{Tenant: "acme", User: "bob", Conversation: "gone"}
	bobKept := memory.Identity{Tenant: "acme", User: "bob", Conversation: "kept"}
	enqueue(alice, "alice's code word")
	enqueue(bobGone, "bob's deleted words")
	enqueue(bobKept, "bob's kept words")

	var down atomic.Bool
	down.Store(true)
	first := New(downPurges{st.Outbox(), &down}, st, nil, nil, Options{Ledger: st, PurgeWait: 100 * time.Millisecond})
	if n := first.PurgeErased(ctx, "acme", "alice", erasedAt); !n.Pending {
		t.Fatalf("PurgeErased, the queue down = %+v; want pending", n)
	}
	if n := first.PurgeDeleted(ctx, bobGone, erasedAt); !n.Pending {
		t.Fatalf("PurgeDeleted, the queue down = %+v; want pending", n)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = first.Close(cctx) // gives the purges up
	cancel()
	if n := outboxPending(t, st); n != 3 {
		t.Fatalf("the queue holds %d entries after the first process stopped; want all 3 (nothing purged)", n)
	}
	ps, err := st.PendingPurges(ctx, 10)
	if err != nil || len(ps) != 2 {
		t.Fatalf("pending purges in the store = %+v, %v; want the two", ps, err)
	}

	down.Store(false)
	mustCapturer(t, downPurges{st.Outbox(), &down}, st, nil, Options{Ledger: st})
	waitFor(t, "the restarted process to purge what the first left pending", func() bool {
		ps, err := st.PendingPurges(ctx, 10)
		return err == nil && len(ps) == 0
	})
	if n := outboxPending(t, st); n != 1 {
		t.Fatalf("the queue holds %d entries after the restart's purge; want bob's kept turn alone", n)
	}
}

// TestPendingPurgeKeptByTheStoreAlone: with a store (Ledger), a purge
// the queue fails is kept by the store alone: once the store lists it
// done — another process took it — this process has nothing pending any
// more, the queue down or not; and stopping gives up nothing the store
// lists (memgate_erasure_purges_given_up_total stays 0): the next
// process takes it.
func TestPendingPurgeKeptByTheStoreAlone(t *testing.T) {
	ctx := context.Background()
	st := mustSQLite(t)
	erasedAt := time.Now()
	var down atomic.Bool
	down.Store(true)
	c := New(downPurges{st.Outbox(), &down}, st, nil, nil, Options{Ledger: st, PurgeWait: 100 * time.Millisecond})
	if n := c.PurgeErased(ctx, "acme", "alice", erasedAt); !n.Pending {
		t.Fatalf("PurgeErased, the queue down = %+v; want pending", n)
	}
	// Another process purged it, and said so in the store.
	if err := st.DonePurges(ctx, []memory.PendingPurge{{Key: memory.UserTombstone("acme", "alice"), At: erasedAt}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "nothing pending once the store lists the purge done", func() bool { return c.purges.pending() == 0 })
	if err := st.AddPendingPurge(ctx, memory.PendingPurge{Key: memory.UserTombstone("acme", "bob"), At: erasedAt}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if n := value(t, c.purges.givenUp); n != 0 {
		t.Fatalf("%v purges given up at shutdown; want none (the store keeps them)", n)
	}
	if ps, err := st.PendingPurges(ctx, 10); err != nil || len(ps) != 1 {
		t.Fatalf("pending purges in the store after shutdown = %+v, %v; want bob's", ps, err)
	}
}
