package record

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// Several processes on one SQLite file: `gateway serve` and `gateway
// worker`, two workers, two gateways. Each process opens its own Store;
// two Stores on one file in a test stand in for them (SQLite locks the
// file the same way between connections of one process as between
// processes).

var (
	_ Leaser      = (*sqlite.Outbox)(nil)
	_ SharedQueue = (*sqlite.Outbox)(nil)
)

// mustSQLiteAt opens a Store on the file at path, as one process would.
func mustSQLiteAt(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// sqliteWorker returns o as the gateway wires a Worker over a SQLite
// store: its outbox's lease, its dead letters and adoption.
func sqliteWorker(o WorkerOptions, s *sqlite.Store) WorkerOptions {
	o = workerWithStore(o, s)
	o.Lease = s.Outbox()
	return o
}

// downSQLite is a SQLite store whose saves fail as unreachable (its disk
// is full, say); the outbox and the rest still work.
type downSQLite struct{ *sqlite.Store }

func (downSQLite) SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error) {
	return memory.SaveResult{}, fmt.Errorf("disk full: %w", memory.ErrUnavailable)
}

func (downSQLite) SaveExchanges(context.Context, []memory.Exchange) ([]memory.SaveResult, error) {
	return nil, fmt.Errorf("disk full: %w", memory.ErrUnavailable)
}

// TestSQLiteTwoWorkersKeepTheOrder: a backlog in the SQLite outbox, saves
// failing for a while, and two processes draining it (`gateway serve` and
// `gateway worker`, or two of either). Every turn is stored once and in
// the order it was queued: one process drains at a time. Also when both
// take the default consumer name and their hosts and pids are alike (two
// containers of one pod, or two on the host's network, each its pid 1 —
// two workers of one test process stand in for them).
func TestSQLiteTwoWorkersKeepTheOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		consumers [2]string
	}{
		{"named", [2]string{"w0", "w1"}},
		{"default names, one host and pid", [2]string{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) { testSQLiteTwoWorkersKeepTheOrder(t, tc.consumers) })
	}
}

func testSQLiteTwoWorkersKeepTheOrder(t *testing.T, consumers [2]string) {
	path := filepath.Join(t.TempDir(), "memgate.db")
	s0 := mustSQLiteAt(t, path)
	const convs, turns = 4, 40
	for i := range turns {
		for c := range convs {
			ex := userExchange(t, "u1", fmt.Sprint("c", c), fmt.Sprintf("c%d turn %02d", c, i))
			ex.ID = NewExchangeID()
			enqueue(t, s0.Outbox(), ex)
		}
	}
	var workers []*Worker
	for i := range 2 {
		s := mustSQLiteAt(t, path)
		flaky := &failNth{Saver: s, failing: map[string]int{"c1 turn 05": 3, "c2 turn 19": 4, "c3 turn 22": 2}}
		opts := fastWorker()
		opts.Consumer = consumers[i]
		opts.Batch = 8
		opts.StaleAfter = time.Hour
		opts.Block = 20 * time.Millisecond
		w := NewWorker(s.Outbox(), flaky, nil, sqliteWorker(opts, s))
		workers = append(workers, w)
		mustRunWorker(t, w)
	}
	waitForLong(t, "backlog drained", func() bool { return outboxPending(t, s0) == 0 })
	for c := range convs {
		got := texts(t, s0, memory.Identity{Tenant: "t1", User: "u1", Conversation: fmt.Sprint("c", c)})
		var want []string
		for i := range turns {
			text := fmt.Sprintf("c%d turn %02d", c, i)
			want = append(want, text, "re: "+text)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("conversation c%d stored out of order or incomplete:\n%v", c, got)
		}
	}
	var saved float64
	for _, w := range workers {
		saved += value(t, w.saved)
	}
	if saved != convs*turns {
		t.Fatalf("saved %v, want %d", saved, convs*turns)
	}
}

// TestSQLiteTwoGatewaysKeepTheOrder: two gateways on one SQLite file.
// Gateway A cannot save (its store fails), so it queues conversation X's
// turn 1 in the outbox; gateway B then captures X's turn 2. B must queue
// it behind turn 1, not store it ahead of it: once the outbox has drained,
// X reads turn 1 then turn 2, each once.
func TestSQLiteTwoGatewaysKeepTheOrder(t *testing.T) {
	for _, client := range []string{"newest only", "full history"} {
		t.Run(client, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memgate.db")
			sa, sb := mustSQLiteAt(t, path), mustSQLiteAt(t, path)
			down := downSQLite{sa}
			a := mustCapturer(t, sa.Outbox(), down, nil, withStore(Options{Shared: sa.Outbox()}, down))
			b := mustCapturer(t, sb.Outbox(), sb, nil, withStore(Options{Shared: sb.Outbox()}, sb))

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

			mustRunWorker(t, NewWorker(sb.Outbox(), sb, nil, sqliteWorker(fastWorker(), sb)))
			waitFor(t, "outbox drained", func() bool { return outboxPending(t, sb) == 0 })
			if got, want := strings.Join(texts(t, sb, first.Identity), " "), "q1 a1 q2 a2"; got != want {
				t.Fatalf("conversation reads %q, want %q", got, want)
			}
			queued, err := sb.Outbox().Queued(context.Background(), ConvKey(first.Identity))
			if err != nil || queued[0] {
				t.Fatalf("the conversation is still counted as queued (%v, %v)", queued, err)
			}
		})
	}
}

// waitForLong is waitFor with a deadline for a backlog on a busy machine.
func waitForLong(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkCaptureSQLite is a capture stored directly in SQLite, one at a
// time, with and without the outbox's per-conversation check before it.
func BenchmarkCaptureSQLite(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run(fmt.Sprintf("shared=%v", shared), func(b *testing.B) {
			s := mustSQLite(b)
			opts := withStore(Options{}, s)
			if shared {
				opts.Shared = s.Outbox()
			}
			c := mustCapturer(b, s.Outbox(), s, nil, opts)
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

// TestDefaultConsumersTakeTurnsOnTheLease: two processes on one SQLite
// file whose hosts and pids are alike (two containers of one pod, or two
// on the host's network, each its pid 1), both workers named by default:
// while one holds the outbox's lease, the other does not — else both
// drain the outbox and split a conversation's turns between them, stored
// out of order. Two workers of one test process stand in for them.
func TestDefaultConsumersTakeTurnsOnTheLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memgate.db")
	sa, sb := mustSQLiteAt(t, path), mustSQLiteAt(t, path)
	a := NewWorker(sa.Outbox(), sa, nil, sqliteWorker(WorkerOptions{}, sa))
	b := NewWorker(sb.Outbox(), sb, nil, sqliteWorker(WorkerOptions{}, sb))
	ctx := context.Background()
	if held, _, err := a.lease(ctx); err != nil || !held {
		t.Fatalf("the first worker's lease: held %v, %v", held, err)
	}
	if held, _, err := b.lease(ctx); err != nil || held {
		t.Fatalf("the second worker holds the lease the first holds (held %v, %v): both drain the outbox", held, err)
	}
}
