package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// queueStore is what the queue-erasure tests need of a store.
type queueStore interface {
	engine.Store
	record.Saver
	record.DeadLetterer
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
	DeadLetters(ctx context.Context, tenant string) ([]memory.DeadLetter, error)
}

// queueTopology is a store with its capture and enrichment queues, wired
// as the gateway wires them, and what the test reads of them.
type queueTopology struct {
	store  queueStore
	queue  record.Queue // the capture queue
	shared record.SharedQueue
	lease  record.Leaser
	enrich record.Queue
	// atRest returns every byte where the queues and the store keep text
	// (the SQLite file and its WAL; every Redis key of the queues, dumped).
	atRest func(t *testing.T) []byte
	// file is the SQLite database's path ("" for other stores).
	file string
}

// capturer returns a Capturer on top's queues saving through saver,
// closed when the test ends.
func (top queueTopology) capturer(t *testing.T, saver record.Saver) *record.Capturer {
	t.Helper()
	c := record.New(top.queue, saver, nil, nil, record.Options{Enrich: top.enrich, Shared: top.shared,
		DeadLetters: top.store, OpTimeout: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// runWorker runs a Worker draining top's capture queue until the test
// ends.
func (top queueTopology) runWorker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := record.NewWorker(top.queue, top.store, nil, record.WorkerOptions{Consumer: "w1", Lease: top.lease, Enrich: top.enrich,
		DeadLetters: top.store, Block: 20 * time.Millisecond, BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// drain runs a Worker on top's capture queue (runWorker) and waits for
// what until the queue is empty.
func (top queueTopology) drain(t *testing.T, what string) {
	t.Helper()
	top.runWorker(t)
	waitUntil(t, what, func() bool {
		n, err := top.queue.Pending(context.Background())
		return err == nil && n == 0
	})
}

// flakySaver fails every save with memory.ErrUnavailable while down.
type flakySaver struct {
	record.Saver
	mu   sync.Mutex
	down bool
}

func (f *flakySaver) set(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

func (f *flakySaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return memory.SaveResult{}, fmt.Errorf("store: %w", memory.ErrUnavailable)
	}
	return f.Saver.SaveExchange(ctx, ex)
}

// queuedTurn returns an engine over top with its Capturer, which queued
// one turn of id saying text while the store was down.
func (top queueTopology) queuedTurn(t *testing.T, id memory.Identity, text string) (*engine.Engine, *record.Capturer) {
	t.Helper()
	flaky := &flakySaver{Saver: top.store}
	c := top.capturer(t, flaky)
	e := engine.New(engine.Options{}, nil)
	e.Use(&engine.Core{Store: top.store, Capturer: c})
	flaky.set(true)
	c.Capture(context.Background(), turn(t, id, text))
	flaky.set(false)
	return e, c
}

// turn builds an exchange of id saying text.
func turn(t *testing.T, id memory.Identity, text string) memory.Exchange {
	t.Helper()
	msg := func(role, s string) memory.Message {
		m, err := memory.ParseMessage(fmt.Appendf(nil, `{"role":%q,"content":%q}`, role, s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return memory.Exchange{Identity: id, Model: "m", Turn: []memory.Message{msg("user", text)}, Reply: msg("assistant", "Noted: "+text)}
}

// contents lists the contents of messages.
func contents(msgs []memory.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return strings.Join(out, " | ")
}

// runQueuedTurnErased: alice's turns wait in the queues — one stored and
// waiting for enrichment, one queued while the store was down — next to
// bob's queued turns, and each has a dead letter. Erasing alice says how
// many of her turns were queued and not yet stored (1), and leaves no
// byte of her text at rest, her conversation no longer queued (her next
// turn is stored at once), and bob's turns and dead letter as they were:
// stored, in order, once the worker drains the queue.
func runQueuedTurnErased(t *testing.T, top queueTopology) {
	ctx := context.Background()
	stamp := time.Now().UnixNano()
	gone := []string{fmt.Sprintf("zqxstored%d", stamp), fmt.Sprintf("zqxqueued%d", stamp), fmt.Sprintf("zqxdead%d", stamp)}
	kept := []string{fmt.Sprintf("zqxbobone%d", stamp), fmt.Sprintf("zqxbobtwo%d", stamp), fmt.Sprintf("zqxbobdead%d", stamp)}
	// Alice's id is an email: her erasure leaves it nowhere either.
	alice := memory.Identity{Tenant: "acme", User: "erase-me-7f3a@example.com", Conversation: "c1"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}

	flaky := &flakySaver{Saver: top.store}
	c := top.capturer(t, flaky)
	e := engine.New(engine.Options{}, nil)
	e.Use(&engine.Core{Store: top.store, Capturer: c})

	c.Capture(ctx, turn(t, alice, "my code word is "+gone[0])) // stored; waits for enrichment
	flaky.set(true)
	c.Capture(ctx, turn(t, alice, "my other code word is "+gone[1]))
	c.Capture(ctx, turn(t, bob, "first "+kept[0]))
	c.Capture(ctx, turn(t, bob, "second "+kept[1]))
	for i, id := range []memory.Identity{alice, bob} {
		word := []string{gone[2], kept[2]}[i]
		if err := top.store.DeadLetter(ctx, memory.DeadLetter{Exchange: "ex-dead-" + id.User, Identity: id, Reason: "refused",
			Payload: fmt.Appendf(nil, `{"said":%q}`, word), At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := top.queue.Pending(ctx); err != nil || n != 3 {
		t.Fatalf("capture queue holds %d entries (%v), want 3 queued turns", n, err)
	}
	before := top.atRest(t)
	for _, w := range append(gone, append(kept, alice.User)...) {
		if !bytes.Contains(before, []byte(w)) {
			t.Fatalf("%s is not at rest before the erasure: the test cannot see what it checks", w)
		}
	}
	flaky.set(false)

	// Her turn queued while the store was down is counted: the one
	// stored (waiting for enrichment only) is a stored row.
	if p, err := e.EraseUser(ctx, alice.Tenant, alice.User); err != nil || p != (memory.QueuePurge{Queued: 1}) {
		t.Fatalf("EraseUser = %+v, %v; want alice's 1 queued turn, purged", p, err)
	}
	after := top.atRest(t)
	for _, w := range append(gone, alice.User) {
		if i := bytes.Index(after, []byte(w)); i >= 0 {
			t.Errorf("erased text or id %s still at rest (byte %d of %d)", w, i, len(after))
		}
	}
	for _, w := range kept {
		if !bytes.Contains(after, []byte(w)) {
			t.Errorf("bob's %s left with alice's", w)
		}
	}
	q, err := top.shared.Queued(ctx, record.ConvKey(alice), record.ConvKey(bob))
	if err != nil || !q[1] || q[0] {
		t.Fatalf("Queued(alice, bob) = %v, %v; want [false true]", q, err)
	}

	// Alice's next turn is stored at once, not queued behind her purged one.
	c.Capture(ctx, turn(t, alice, "a fresh start"))
	if msgs, err := top.store.Recent(ctx, alice, 10); err != nil || contents(msgs) != "a fresh start | Noted: a fresh start" {
		t.Fatalf("alice's conversation after her fresh turn = %q, %v; want the fresh turn alone, stored at once", contents(msgs), err)
	}
	if n, err := top.queue.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("capture queue holds %d entries (%v), want bob's 2", n, err)
	}

	// The worker drains bob's turns, in order.
	top.drain(t, "bob's turns stored")
	want := "first " + kept[0] + " | Noted: first " + kept[0] + " | second " + kept[1] + " | Noted: second " + kept[1]
	if msgs, err := top.store.Recent(ctx, bob, 10); err != nil || contents(msgs) != want {
		t.Fatalf("bob's conversation = %q, %v; want %q", contents(msgs), err, want)
	}
	if msgs, err := top.store.Recent(ctx, alice, 10); err != nil || len(msgs) != 2 {
		t.Fatalf("alice's conversation = %q, %v; want the fresh turn alone", contents(msgs), err)
	}
	dls, err := top.store.DeadLetters(ctx, "acme")
	if err != nil || len(dls) != 1 || dls[0].User != "bob" {
		t.Fatalf("dead letters after the erasure = %+v, %v; want bob's alone", dls, err)
	}
}

// waitUntil polls cond until it holds, failing the test after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sqliteTopology is the embedded store with its two outboxes.
func sqliteTopology(t *testing.T) queueTopology {
	path := filepath.Join(t.TempDir(), "memgate.db")
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return queueTopology{store: st, queue: st.Outbox(), shared: st.Outbox(), lease: st.Outbox(), enrich: st.EnrichOutbox(), file: path,
		atRest: func(t *testing.T) []byte {
			var all []byte
			for _, p := range []string{path, path + "-wal", path + "-journal"} {
				b, err := os.ReadFile(p)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			return all
		}}
}

// TestErasurePurgesQueuedTurnsSQLite: on the embedded store, an erased
// user's queued and enrichment-bound turns leave the database file and
// the WAL with the rest of their data.
func TestErasurePurgesQueuedTurnsSQLite(t *testing.T) {
	runQueuedTurnErased(t, sqliteTopology(t))
}

// postgresRedisTopology is PostgreSQL with the Redis capture and
// enrichment streams.
func postgresRedisTopology(t *testing.T) queueTopology {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := postgres.Open(ctx, testenv.PostgresURL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	rdb, err := redis.NewClient(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testenv.RedisPrefix(t)
	q, err := redis.NewQueue(ctx, rdb, redis.QueueConfig{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	en, err := q.Sibling(ctx, "enrich")
	if err != nil {
		t.Fatal(err)
	}
	return queueTopology{store: pg, queue: q, shared: q, lease: q, enrich: en,
		atRest: func(t *testing.T) []byte {
			// Every key of the queues as Redis holds it and writes it to
			// a snapshot, the bytes of deleted stream entries included
			// (XRANGE does not show them).
			all := testenv.RedisAtRest(t, rdb, prefix)
			dls, err := pg.DeadLetters(context.Background(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range dls {
				all = append(all, d.Payload...)
			}
			return all
		}}
}

// TestErasurePurgesQueuedTurnsPostgresRedis: with PostgreSQL and Redis,
// an erased user's entries leave the capture and enrichment streams, and
// the capture stream's count of their conversation goes with them.
func TestErasurePurgesQueuedTurnsPostgresRedis(t *testing.T) {
	runQueuedTurnErased(t, postgresRedisTopology(t))
}

// holdingSaver holds the first save of held's conversation until release
// is closed, saying on holding that it holds it and on saved what the
// save returned.
type holdingSaver struct {
	record.Saver
	held             memory.Identity
	holding, release chan struct{}
	saved            chan memory.SaveResult
	once             sync.Once
}

func (h *holdingSaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	if ex.Identity != h.held {
		return h.Saver.SaveExchange(ctx, ex)
	}
	first := false
	h.once.Do(func() {
		first = true
		close(h.holding)
		<-h.release
	})
	res, err := h.Saver.SaveExchange(ctx, ex)
	if first {
		h.saved <- res
	}
	return res, err
}

// ackingQueue is a queue that says on acked what its consumer
// acknowledges.
type ackingQueue struct {
	record.Queue
	acked chan []string
}

func (q ackingQueue) Ack(ctx context.Context, ids ...string) error {
	err := q.Queue.Ack(ctx, ids...)
	select {
	case q.acked <- ids:
	default:
	}
	return err
}

// runInFlightErased: the worker has claimed alice's queued turn and is
// storing it when she is erased. The erasure purges the entry all the
// same — its text is not at rest when the call returns — and the
// worker's save, landing after it, is refused: nothing of the turn is
// stored or queued for enrichment, the worker's acknowledgement finds
// nothing, and her conversation is not left queued.
func runInFlightErased(t *testing.T, top queueTopology) {
	ctx := context.Background()
	word := fmt.Sprintf("zqxinflight%d", time.Now().UnixNano())
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	e, _ := top.queuedTurn(t, alice, "my code word is "+word)

	hold := &holdingSaver{Saver: top.store, held: alice, holding: make(chan struct{}), release: make(chan struct{}),
		saved: make(chan memory.SaveResult, 1)}
	q := ackingQueue{Queue: top.queue, acked: make(chan []string, 16)}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	w := record.NewWorker(q, hold, nil, record.WorkerOptions{Consumer: "w1", Lease: top.lease, Enrich: top.enrich,
		DeadLetters: top.store, Block: 20 * time.Millisecond, BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-hold.holding:
	case <-time.After(30 * time.Second):
		close(hold.release)
		t.Fatal("the worker never claimed alice's turn")
	}

	err := e.DeleteUser(ctx, alice.Tenant, alice.User)
	if i := bytes.Index(top.atRest(t), []byte(word)); i >= 0 {
		t.Errorf("text of the turn being stored still at rest after the erasure (byte %d)", i)
	}
	if n, err := top.queue.Pending(ctx); err != nil || n != 0 {
		t.Errorf("capture queue holds %d entries (%v) after the erasure, want none", n, err)
	}
	close(hold.release)
	if err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	select {
	case res := <-hold.saved:
		if !res.Dropped {
			t.Fatalf("the worker's save after the erasure = %+v, want it dropped", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker's save never returned")
	}
	select {
	case <-q.acked:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never acknowledged the entry")
	}
	if msgs, err := top.store.Recent(ctx, alice, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("alice's purged turn came back: %q, %v", contents(msgs), err)
	}
	if n, err := top.enrich.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("enrichment queue holds %d entries (%v) after the refused save", n, err)
	}
	if n, err := top.queue.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("capture queue holds %d entries (%v)", n, err)
	}
	if q, err := top.shared.Queued(ctx, record.ConvKey(alice)); err != nil || q[0] {
		t.Fatalf("Queued(alice) = %v, %v; want false", q, err)
	}
	if i := bytes.Index(top.atRest(t), []byte(word)); i >= 0 {
		t.Errorf("text of the purged turn at rest after the worker's save (byte %d)", i)
	}
}

// TestErasurePurgesTurnBeingStoredSQLite: see runInFlightErased.
func TestErasurePurgesTurnBeingStoredSQLite(t *testing.T) {
	runInFlightErased(t, sqliteTopology(t))
}

// TestErasurePurgesTurnBeingStoredPostgresRedis: see runInFlightErased.
func TestErasurePurgesTurnBeingStoredPostgresRedis(t *testing.T) {
	runInFlightErased(t, postgresRedisTopology(t))
}
