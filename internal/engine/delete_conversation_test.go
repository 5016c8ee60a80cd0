package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// midDeleteStore notes, once its first DeleteConversation committed, the
// time a turn received then would carry: one that arrived while the
// deletion ran and read what it deleted.
type midDeleteStore struct {
	queueStore
	mid time.Time
}

func (s *midDeleteStore) DeleteConversation(ctx context.Context, id memory.Identity) error {
	err := s.queueStore.DeleteConversation(ctx, id)
	if s.mid.IsZero() {
		s.mid = time.Now()
	}
	return err
}

// runConversationDeleted: alice's conversation c1 has a turn stored and
// waiting for enrichment and one queued while the store was down, next to
// a queued turn of her conversation c2. Deleting c1 leaves no byte of c1's
// text at rest and c1 no longer queued, c2's turn as it was; a turn
// received while the deletion ran (after its first pass committed), stored
// after it, is dropped and does not bring c1 back; a turn received after
// it starts c1 again at once; the worker stores c2's turn.
func runConversationDeleted(t *testing.T, top queueTopology) {
	ctx := context.Background()
	stamp := time.Now().UnixNano()
	gone := []string{fmt.Sprintf("zqxcstored%d", stamp), fmt.Sprintf("zqxcqueued%d", stamp), fmt.Sprintf("zqxcinflight%d", stamp)}
	kept := fmt.Sprintf("zqxcother%d", stamp)
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	c2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}

	flaky := &flakySaver{Saver: top.store}
	c := top.capturer(t, flaky)
	st := &midDeleteStore{queueStore: top.store}
	e := engine.New(engine.Options{}, nil)
	e.Use(&engine.Core{Store: st, Capturer: c})

	c.Capture(ctx, turn(t, c1, "my code word is "+gone[0])) // stored; waits for enrichment
	flaky.set(true)
	c.Capture(ctx, turn(t, c1, "my other code word is "+gone[1]))
	c.Capture(ctx, turn(t, c2, "elsewhere "+kept))
	flaky.set(false)
	if n, err := top.queue.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("capture queue holds %d entries (%v), want 2 queued turns", n, err)
	}
	before := top.atRest(t)
	for _, w := range append(gone[:2:2], kept) {
		if !bytes.Contains(before, []byte(w)) {
			t.Fatalf("%s is not at rest before the deletion: the test cannot see what it checks", w)
		}
	}

	if err := e.DeleteConversation(ctx, c1); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	after := top.atRest(t)
	for _, w := range gone[:2] {
		if i := bytes.Index(after, []byte(w)); i >= 0 {
			t.Errorf("deleted text %s still at rest (byte %d of %d)", w, i, len(after))
		}
	}
	if !bytes.Contains(after, []byte(kept)) {
		t.Errorf("c2's queued turn %s left with c1", kept)
	}
	q, err := top.shared.Queued(ctx, record.ConvKey(c1), record.ConvKey(c2))
	if err != nil || q[0] || !q[1] {
		t.Fatalf("Queued(c1, c2) = %v, %v; want [false true]", q, err)
	}

	// The turn in flight: received after the first pass committed, before
	// the call returned, saved now.
	late := turn(t, c1, "the answer repeats "+gone[2])
	late.Received = st.mid
	c.Capture(ctx, late)
	if _, msgs, err := top.store.Conversation(ctx, c1); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("the turn in flight brought the deleted conversation back: %q, %v", contents(msgs), err)
	}
	if i := bytes.Index(top.atRest(t), []byte(gone[2])); i >= 0 {
		t.Errorf("text of the turn in flight at rest (byte %d)", i)
	}

	// A fresh turn starts c1 again, stored at once.
	c.Capture(ctx, turn(t, c1, "a fresh start"))
	if msgs, err := top.store.Recent(ctx, c1, 10); err != nil || contents(msgs) != "a fresh start | Noted: a fresh start" {
		t.Fatalf("c1 after a fresh turn = %q, %v; want the fresh turn alone, stored at once", contents(msgs), err)
	}

	top.runWorker(t)
	waitUntil(t, "c2's turn stored", func() bool {
		n, err := top.queue.Pending(ctx)
		return err == nil && n == 0
	})
	if msgs, err := top.store.Recent(ctx, c2, 10); err != nil || contents(msgs) != "elsewhere "+kept+" | Noted: elsewhere "+kept {
		t.Fatalf("c2 = %q, %v; want its queued turn", contents(msgs), err)
	}
	if msgs, err := top.store.Recent(ctx, c1, 10); err != nil || len(msgs) != 2 {
		t.Fatalf("c1 = %q, %v; want the fresh turn alone", contents(msgs), err)
	}
}

// TestConversationDeletePurgesAndHoldsSQLite: see runConversationDeleted.
func TestConversationDeletePurgesAndHoldsSQLite(t *testing.T) {
	runConversationDeleted(t, sqliteTopology(t))
}

// TestConversationDeletePurgesAndHoldsPostgresRedis: see runConversationDeleted.
func TestConversationDeletePurgesAndHoldsPostgresRedis(t *testing.T) {
	runConversationDeleted(t, postgresRedisTopology(t))
}

// runQueuedConversationDeleted: alice's conversation c3 has only turns
// queued while the store was down, none stored yet (a worker's backlog).
// Deleting c3 deletes those turns: the call succeeds, their text leaves
// the queue, and once the worker has drained the queue c3 does not exist.
func runQueuedConversationDeleted(t *testing.T, top queueTopology) {
	ctx := context.Background()
	word := fmt.Sprintf("zqxconlyqueued%d", time.Now().UnixNano())
	c3 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c3"}
	e, _ := top.queuedTurn(t, c3, "my code word is "+word)
	if n, err := top.queue.Pending(ctx); err != nil || n != 1 {
		t.Fatalf("capture queue holds %d entries (%v), want the queued turn", n, err)
	}

	if err := e.DeleteConversation(ctx, c3); err != nil {
		t.Fatalf("DeleteConversation of a conversation whose turns are all queued = %v, want them deleted", err)
	}
	if i := bytes.Index(top.atRest(t), []byte(word)); i >= 0 {
		t.Errorf("deleted text %s still at rest (byte %d)", word, i)
	}
	top.runWorker(t)
	waitUntil(t, "capture queue drained", func() bool {
		n, err := top.queue.Pending(ctx)
		return err == nil && n == 0
	})
	if _, msgs, err := top.store.Conversation(ctx, c3); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("the deleted conversation came back from the queue: %q, %v", contents(msgs), err)
	}
}

// TestQueuedConversationDeletedSQLite: see runQueuedConversationDeleted.
func TestQueuedConversationDeletedSQLite(t *testing.T) {
	runQueuedConversationDeleted(t, sqliteTopology(t))
}

// TestQueuedConversationDeletedPostgresRedis: see runQueuedConversationDeleted.
func TestQueuedConversationDeletedPostgresRedis(t *testing.T) {
	runQueuedConversationDeleted(t, postgresRedisTopology(t))
}
