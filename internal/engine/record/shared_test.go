package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/testenv"
)

var _ SharedQueue = (*redis.Queue)(nil)

// downStore is a PostgreSQL store whose saves fail as unreachable (its
// connection is away); reads, adoption and dead letters still work.
type downStore struct{ *postgres.Store }

func (downStore) SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error) {
	return memory.SaveResult{}, fmt.Errorf("store connection away: %w", memory.ErrUnavailable)
}

func (downStore) SaveExchanges(context.Context, []memory.Exchange) ([]memory.SaveResult, error) {
	return nil, fmt.Errorf("store connection away: %w", memory.ErrUnavailable)
}

// refusingSaver refuses every exchange for good.
type refusingSaver struct{}

func (refusingSaver) SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error) {
	return memory.SaveResult{}, fmt.Errorf("bad exchange: %w", memory.ErrInvalid)
}

// TestSharedQueueKeepsTheOrderAcrossGateways: two gateways share one
// PostgreSQL store and one Redis capture queue. Gateway A's store
// connection is away, so it queues conversation X's turn 1; gateway B
// then captures X's turn 2. B must queue it behind turn 1 (not store it
// ahead of it), so that once the worker has drained the queue X reads
// turn 1 then turn 2, each once.
func TestSharedQueueKeepsTheOrderAcrossGateways(t *testing.T) {
	for _, client := range []string{"newest only", "full history"} {
		t.Run(client, func(t *testing.T) {
			pg := mustPostgres(t)
			prefix := testenv.RedisPrefix(t)
			qa, _ := mustRedisQueue(t, prefix)
			qb, _ := mustRedisQueue(t, prefix)
			down := downStore{pg}
			a := mustCapturer(t, qa, down, nil, withStore(Options{Shared: qa}, down))
			b := mustCapturer(t, qb, pg, nil, withStore(Options{Shared: qb}, pg))

			first := exchange(t, "req-1", "q1", "a1")
			a.Capture(context.Background(), first)
			if got := value(t, a.metrics.queued); got != 1 {
				t.Fatalf("gateway A queued %v turns, want 1", got)
			}
			next := exchange(t, "req-2", "q2", "a2")
			if client == "full history" {
				next.Prior = append(append(next.Prior, first.Turn...), first.Reply)
			}
			b.Capture(context.Background(), next)

			wq := drainInto(t, prefix, pg)
			if got, want := strings.Join(texts(t, pg, first.Identity), " "), "q1 a1 q2 a2"; got != want {
				t.Fatalf("conversation reads %q, want %q", got, want)
			}
			waitFor(t, "the conversation no longer counted as queued", func() bool {
				q, err := wq.Queued(context.Background(), ConvKey(first.Identity))
				return err == nil && !q[0]
			})
		})
	}
}

// TestSharedQueueCountsEndWithTheirTurns: a conversation counted as queued
// is released once the worker is done with its turns, whatever became of
// them: stored, set aside as a dead letter, or stored by a worker that
// died before acknowledging it (its entry is redelivered, found stored,
// and acknowledged) — so no conversation stays queued for ever, and the
// counts leave nothing behind in Redis.
func TestSharedQueueCountsEndWithTheirTurns(t *testing.T) {
	cases := map[string]struct {
		saver Saver
		// crash: a worker claims the entry and stores it, then dies before
		// acknowledging it.
		crash bool
	}{
		"stored":         {},
		"dead letter":    {saver: refusingSaver{}},
		"worker crashed": {crash: true},
		"erased user":    {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pg := mustPostgres(t)
			prefix := testenv.RedisPrefix(t)
			q, rdb := mustRedisQueue(t, prefix)
			down := downStore{pg}
			c := mustCapturer(t, q, down, nil, withStore(Options{Shared: q}, down))
			ex := exchange(t, "req-1", "q1", "a1")
			id := ConvKey(ex.Identity)
			c.Capture(context.Background(), ex)
			queued := func() bool {
				got, err := q.Queued(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				return got[0]
			}
			if !queued() {
				t.Fatal("a queued turn's conversation is not counted as queued")
			}
			switch name {
			case "worker crashed":
				ds, err := q.Claim(context.Background(), "crashed", 10, time.Hour, 0)
				if err != nil || len(ds) != 1 {
					t.Fatalf("claim = %d, %v", len(ds), err)
				}
				if _, err := pg.SaveExchange(context.Background(), ex); err != nil {
					t.Fatal(err)
				}
				if !queued() {
					t.Fatal("an unacknowledged turn's conversation is not counted as queued")
				}
			case "erased user":
				if err := pg.DeleteUser(context.Background(), ex.Tenant, ex.User); err != nil {
					t.Fatal(err)
				}
			}
			saver := tc.saver
			if saver == nil {
				saver = pg
			}
			wo := workerWithStore(fastWorker(), pg)
			wo.Lease = q
			mustRunWorker(t, NewWorker(q, saver, nil, wo))
			waitFor(t, "the conversation no longer counted as queued", func() bool { return !queued() })
			n, err := rdb.Exists(context.Background(), prefix+"capture:queued").Result()
			if err != nil || n != 0 {
				t.Fatalf("the per-conversation counts are left in Redis (%d, %v)", n, err)
			}
		})
	}
}

// BenchmarkCapturePostgres is a capture stored directly in PostgreSQL,
// one at a time, with and without the shared-queue check before it.
func BenchmarkCapturePostgres(b *testing.B) {
	pg := mustPostgres(b)
	for _, shared := range []bool{false, true} {
		b.Run(fmt.Sprintf("shared=%v", shared), func(b *testing.B) {
			q, _ := mustRedisQueue(b, testenv.RedisPrefix(b))
			opts := withStore(Options{}, pg)
			if shared {
				opts.Shared = q
			}
			c := mustCapturer(b, q, pg, nil, opts)
			ex := exchange(b, "req", "hello", "hi")
			for b.Loop() {
				c.Capture(context.Background(), ex)
			}
			b.StopTimer()
			if got := value(b, c.metrics.queued); got != 0 {
				b.Fatalf("%v captures queued", got)
			}
		})
	}
}

// awayShared is a shared capture queue that does not answer.
type awayShared struct{}

func (awayShared) EnqueueTurn(context.Context, string, []byte) error {
	return fmt.Errorf("queue away: %w", memory.ErrUnavailable)
}

func (awayShared) Queued(context.Context, ...string) ([]bool, error) {
	return nil, fmt.Errorf("queue away: %w", memory.ErrUnavailable)
}

// TestSharedQueueAwayStoresDirectly: when the shared queue cannot tell
// whether a conversation has turns queued, the turn is stored directly
// (a chat's turn is not held while a memory backend is away), and the
// failed check is counted.
func TestSharedQueueAwayStoresDirectly(t *testing.T) {
	saver := newFakeSaver()
	c := mustCapturer(t, newFakeQueue(), saver, nil, Options{Shared: awayShared{}})
	for i := range 3 {
		c.Capture(context.Background(), exchange(t, "req", fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	if n := saver.callCount(); n != 3 {
		t.Fatalf("stored %d turns directly, want 3", n)
	}
	if got := value(t, c.metrics.queued); got != 0 {
		t.Fatalf("queued %v turns", got)
	}
	if got := value(t, c.metrics.failures.WithLabelValues("queued_check")); got < 1 {
		t.Fatal("the failed check is not counted")
	}
}

// TestSharedQueueHoldsTurnsBehindAnOlderGatewaysTurn: during a rolling
// upgrade, a gateway of before ConvKey's digest queues conversation X's
// turn 1 under X's former name (legacyConvKey); a new gateway then
// captures X's turn 2 and must queue it behind turn 1, so X reads turn 1
// then turn 2.
func TestSharedQueueHoldsTurnsBehindAnOlderGatewaysTurn(t *testing.T) {
	pg := mustPostgres(t)
	prefix := testenv.RedisPrefix(t)
	q, _ := mustRedisQueue(t, prefix)
	b := mustCapturer(t, q, pg, nil, withStore(Options{Shared: q}, pg)) // started on an empty queue
	first := exchange(t, "req-1", "q1", "a1")
	payload, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueTurn(context.Background(), legacyConvKey(first.Identity), payload); err != nil {
		t.Fatal(err)
	}
	b.Capture(context.Background(), exchange(t, "req-2", "q2", "a2"))
	if got := value(t, b.metrics.queued); got != 1 {
		t.Fatalf("the new gateway queued %v turns, want 1 (behind the older gateway's)", got)
	}
	drainInto(t, prefix, pg)
	if got, want := strings.Join(texts(t, pg, first.Identity), " "), "q1 a1 q2 a2"; got != want {
		t.Fatalf("conversation reads %q, want %q", got, want)
	}
}

// drainInto runs a worker on the Redis capture queue under prefix, storing
// into pg, and waits until it has drained the queue; it returns the
// worker's queue handle.
func drainInto(t *testing.T, prefix string, pg *postgres.Store) *redis.Queue {
	t.Helper()
	wq, _ := mustRedisQueue(t, prefix)
	wo := workerWithStore(fastWorker(), pg)
	wo.Lease = wq
	mustRunWorker(t, NewWorker(wq, pg, nil, wo))
	waitFor(t, "capture queue drained", func() bool {
		n, err := wq.Pending(context.Background())
		return err == nil && n == 0
	})
	return wq
}

// TestConvKeyHoldsNoID: the name a shared queue keeps for a conversation
// holds none of its ids in the clear, and tells identities apart.
func TestConvKeyHoldsNoID(t *testing.T) {
	a := memory.Identity{Tenant: "acme", User: "erase-me-7f3a@example.com", Conversation: "trip-2026"}
	b := memory.Identity{Tenant: "acme", User: "erase-me-7f3a@example.co", Conversation: "mtrip-2026"}
	for _, part := range []string{a.Tenant, a.User, a.Conversation} {
		if strings.Contains(ConvKey(a), part) {
			t.Errorf("ConvKey(%+v) = %q holds %q", a, ConvKey(a), part)
		}
	}
	if ConvKey(a) == ConvKey(b) || ConvKey(a) != ConvKey(a) {
		t.Errorf("ConvKey is not one name per identity: %q, %q", ConvKey(a), ConvKey(b))
	}
}
