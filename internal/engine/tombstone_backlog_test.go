package engine_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/memory"
)

// TestDeletedConversationStaysDeletedThroughALongBacklog: alice deletes
// c9, which the store does not hold yet, while a turn of it received
// before the deletion is still retried in place; the store fails on, so
// the turn enters the capture queue after the deletion purged it, and
// waits there longer than a tombstone of a conversation never stored
// lives (the store down for over a week). Another deletion comes when the
// store is back, before the queue is drained: the tombstone must not
// expire while a turn queued before its expiry waits, and the worker,
// draining the queue, drops the turn instead of starting c9 again. A turn
// of another conversation queued beside it is stored.
func TestDeletedConversationStaysDeletedThroughALongBacklog(t *testing.T) {
	ctx := context.Background()
	top := sqliteTopology(t)
	c9 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c9"}
	c10 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c10"}
	keep := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c11"}
	flaky := &flakySaver{Saver: top.store}
	c := top.capturer(t, flaky)
	e := engine.New(engine.Options{}, nil)
	e.Use(&engine.Core{Store: top.store, Capturer: c})

	// Eight days pass below: the deletion and the queue entries are made
	// that much older then; the turn is dated as received before both.
	age := memory.UnstoredTombstoneLife + 24*time.Hour
	received := time.Now().Add(-age - time.Minute)
	if err := e.DeleteConversation(ctx, c9); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteConversation(c9) = %v, want memory.ErrNotFound (nothing stored or queued yet)", err)
	}
	flaky.set(true)
	late := turn(t, c9, "a turn of the deleted conversation")
	late.At, late.Received = received, received
	c.Capture(ctx, late)
	other := turn(t, keep, "a turn of another conversation")
	other.At, other.Received = time.Now(), time.Now()
	c.Capture(ctx, other)
	flaky.set(false)
	if n, err := top.queue.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("capture queue holds %d entries (%v), want the two turns", n, err)
	}

	db, err := sql.Open("sqlite", "file:"+top.file+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`UPDATE conversation_tombstones SET deleted_at = deleted_at - ?`,
		`UPDATE outbox SET enqueued_at = enqueued_at - ?`} {
		if _, err := db.Exec(q, age.Nanoseconds()); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// The store is back: another deletion, then the worker drains.
	_ = e.DeleteConversation(ctx, c10)
	if at, err := top.store.DeletedAt(ctx, c9); err != nil || at.IsZero() {
		t.Errorf("c9's tombstone after a deletion with its turn still queued: %v, %v; want it kept", at, err)
	}
	top.runWorker(t)
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := top.queue.Pending(ctx)
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("capture queue still holds %d entries (%v)", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, msgs, err := top.store.Conversation(ctx, c9); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("deleted conversation c9 after the backlog drained: %d messages, %v; want it still deleted", len(msgs), err)
	}
	if _, msgs, err := top.store.Conversation(ctx, keep); err != nil || len(msgs) != 2 {
		t.Fatalf("c11's queued turn: %d messages, %v; want it stored", len(msgs), err)
	}
}
