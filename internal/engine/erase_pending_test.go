package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// unpurgeable is a queue whose purges fail while down (as a Redis that
// does not answer), everything else going through.
type unpurgeable struct {
	record.Queue
	down *atomic.Bool
}

func (q unpurgeable) Purge(ctx context.Context, match func([]byte) bool) (int, error) {
	if q.down.Load() {
		return 0, fmt.Errorf("purge: %w", memory.ErrUnavailable)
	}
	return q.Queue.Purge(ctx, match)
}

// runPurgePendingTurnRefused: the queues cannot be purged (down) when
// alice is erased, or her conversation deleted, while a turn of hers
// received before waits in the capture queue beside bob's. The call
// answers the store's erasure with the purge pending, and the worker,
// draining the queue before the purge went through, stores bob's turn
// and drops hers: the erasure's or the deletion's tombstone refuses it,
// and no dead letter keeps it. (The turns are dated as the proxy dates
// them: a deletion drops a turn received before it, memory.Exchange.Received.) Once the queues take purges again, the
// pending purge goes through in the background.
func runPurgePendingTurnRefused(t *testing.T, top queueTopology, erase func(ctx context.Context, e *engine.Engine, id memory.Identity) (memory.QueuePurge, error)) {
	ctx := context.Background()
	stamp := time.Now().UnixNano()
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	var down atomic.Bool
	flaky := &flakySaver{Saver: top.store}
	c := record.New(unpurgeable{top.queue, &down}, flaky, nil, nil, record.Options{Enrich: unpurgeable{top.enrich, &down},
		Shared: top.shared, DeadLetters: top.store, OpTimeout: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	e := engine.New(engine.Options{}, nil)
	e.Use(&engine.Core{Store: top.store, Capturer: c})
	flaky.set(true)
	for _, id := range []memory.Identity{alice, bob} {
		ex := turn(t, id, fmt.Sprint(id.User, " says zqxpending", stamp))
		ex.Received = time.Now() // as the proxy dates what it captures
		c.Capture(ctx, ex)
	}
	flaky.set(false)
	if n, err := top.queue.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("capture queue holds %d entries (%v), want the two turns", n, err)
	}

	down.Store(true)
	p, err := erase(ctx, e, alice)
	// alice's conversation is not stored (its turn waits in the queue): a
	// deletion says so (memory.ErrNotFound), the queues unable to tell.
	if errors.Is(err, memory.ErrNotFound) {
		err = nil
	}
	if err != nil || !p.Pending {
		t.Fatalf("erasure with the queues down = %+v, %v; want the purge pending", p, err)
	}
	if v := gauge(t, c.Collectors(), "memgate_erasure_purges_pending"); v != 1 {
		t.Errorf("memgate_erasure_purges_pending = %v, want 1", v)
	}
	if n, err := top.queue.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("capture queue holds %d entries (%v), want both turns (nothing purged)", n, err)
	}

	top.drain(t, "the worker to drain the queue")
	if msgs, err := top.store.Recent(ctx, alice, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("alice's turn received before the erasure stored from the queue: %q, %v", contents(msgs), err)
	}
	if _, _, err := top.store.Conversation(ctx, alice); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("alice's conversation after the queue drained: %v; want it gone", err)
	}
	if msgs, err := top.store.Recent(ctx, bob, 10); err != nil || len(msgs) != 2 {
		t.Fatalf("bob's queued turn: %q, %v; want it stored", contents(msgs), err)
	}
	dls, err := top.store.DeadLetters(ctx, "acme")
	if err != nil || len(dls) != 0 {
		t.Fatalf("dead letters = %+v, %v; want none", dls, err)
	}
	if v := gauge(t, c.Collectors(), "memgate_erasure_purges_failed_total"); v < 1 {
		t.Errorf("memgate_erasure_purges_failed_total = %v, want the failed attempt counted", v)
	}

	down.Store(false)
	waitUntil(t, "the pending purge to go through", func() bool {
		return gauge(t, c.Collectors(), "memgate_erasure_purges_pending") == 0
	})
}

// pendingErasures are the calls whose purge may be left pending.
var pendingErasures = []struct {
	name  string
	erase func(ctx context.Context, e *engine.Engine, id memory.Identity) (memory.QueuePurge, error)
}{
	{"user erased", func(ctx context.Context, e *engine.Engine, id memory.Identity) (memory.QueuePurge, error) {
		return e.EraseUser(ctx, id.Tenant, id.User)
	}},
	{"conversation deleted", func(ctx context.Context, e *engine.Engine, id memory.Identity) (memory.QueuePurge, error) {
		return e.EraseConversation(ctx, id)
	}},
}

// TestPurgePendingTurnRefusedSQLite: see runPurgePendingTurnRefused.
func TestPurgePendingTurnRefusedSQLite(t *testing.T) {
	for _, tt := range pendingErasures {
		t.Run(tt.name, func(t *testing.T) { runPurgePendingTurnRefused(t, sqliteTopology(t), tt.erase) })
	}
}

// TestPurgePendingTurnRefusedPostgresRedis: see runPurgePendingTurnRefused.
func TestPurgePendingTurnRefusedPostgresRedis(t *testing.T) {
	for _, tt := range pendingErasures {
		t.Run(tt.name, func(t *testing.T) { runPurgePendingTurnRefused(t, postgresRedisTopology(t), tt.erase) })
	}
}

// TestDeletingANeverStoredConversationWhileThePurgeIsPendingIsNotFound:
// with the queues not taking purges, deleting a conversation the store
// does not hold does not answer that it was deleted: it answers
// memory.ErrNotFound, as when the queues answer and hold none of it, and
// says the purge is pending (turns of it may wait there; they are purged
// once the queues answer, and refused meanwhile). A stored conversation
// is deleted, its purge pending.
func TestDeletingANeverStoredConversationWhileThePurgeIsPendingIsNotFound(t *testing.T) {
	ctx := context.Background()
	top := sqliteTopology(t)
	var down atomic.Bool
	c := record.New(unpurgeable{top.queue, &down}, top.store, nil, nil, record.Options{Enrich: unpurgeable{top.enrich, &down},
		Shared: top.shared, OpTimeout: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	e := engine.New(engine.Options{}, nil)
	e.Use(&engine.Core{Store: top.store, Capturer: c})
	stored := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	c.Capture(ctx, turn(t, stored, "alice says hello"))
	down.Store(true)
	p, err := e.EraseConversation(ctx, memory.Identity{Tenant: "acme", User: "alice", Conversation: "never"})
	if !errors.Is(err, memory.ErrNotFound) || !p.Pending {
		t.Fatalf("deleting a conversation never stored, the queues down = %+v, %v; want memory.ErrNotFound, the purge pending", p, err)
	}
	if p, err := e.EraseConversation(ctx, stored); err != nil || !p.Pending {
		t.Fatalf("deleting a stored conversation, the queues down = %+v, %v; want it deleted, the purge pending", p, err)
	}
}
