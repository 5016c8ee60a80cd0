package record

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// downSaver is a store that is away: every save fails as unreachable.
type downSaver struct{}

func (downSaver) SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error) {
	return memory.SaveResult{}, fmt.Errorf("store away: %w", memory.ErrUnavailable)
}

// TestCaptureAfterRestartFollowsTheQueuedTurns: a process that queued a
// conversation's turn (its store was away) and stopped before the worker
// stored it leaves that turn in the capture queue. The next process's
// captures of the conversation follow it there until the queue has
// drained, whichever client sent them: the turns are stored in the order
// they were answered, each once (a full-history client's next turn resends
// the queued one as its history). On both stores.
func TestCaptureAfterRestartFollowsTheQueuedTurns(t *testing.T) {
	type restartStore interface {
		Saver
		storeCaps
		Recent(context.Context, memory.Identity, int) ([]memory.Message, error)
	}
	stores := map[string]func(t *testing.T) (Queue, restartStore){
		"sqlite": func(t *testing.T) (Queue, restartStore) {
			s := mustSQLite(t)
			return s.Outbox(), s
		},
		"postgres+redis": func(t *testing.T) (Queue, restartStore) {
			q, _ := mustRedisQueue(t, testenv.RedisPrefix(t))
			return q, mustPostgres(t)
		},
	}
	for name, open := range stores {
		for _, client := range []string{"newest only", "full history"} {
			t.Run(name+"/"+client, func(t *testing.T) {
				q, store := open(t)
				first := exchange(t, "req-1", "q0", "a0")
				before := New(q, downSaver{}, nil, nil, Options{})
				before.Capture(context.Background(), first)
				if err := before.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				queued := func() int64 {
					n, err := q.Pending(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					return n
				}
				if n := queued(); n != 1 {
					t.Fatalf("capture queue holds %d, want the first turn", n)
				}
				// The process restarts with its store back.
				after := mustCapturer(t, q, store, nil, withStore(Options{}, store))
				next := exchange(t, "req-2", "q1", "a1")
				if client == "full history" {
					next.Prior = append(append(next.Prior, first.Turn...), first.Reply)
				}
				after.Capture(context.Background(), next)
				mustRunWorker(t, NewWorker(q, store, nil, workerWithStore(fastWorker(), store)))
				waitFor(t, "capture queue drained", func() bool { return queued() == 0 })
				if got, want := strings.Join(texts(t, store, first.Identity), " "), "q0 a0 q1 a1"; got != want {
					t.Fatalf("stored %q, want %q", got, want)
				}
			})
		}
	}
}

// TestWorkerAfterAStopKeepsTheOrder: a worker claimed conversation X's
// turns 1 and 2 and stopped before storing them (shut down while its
// store failed, or killed), leaving them claimed; turn 3 was queued after.
// The next worker — the same process restarted under the same name (a
// container's host and pid 1), or another process once the stopped one's
// lease ran out — stores 1, 2, 3 in that order, each once, without
// waiting for the claims to go stale. On both stores.
func TestWorkerAfterAStopKeepsTheOrder(t *testing.T) {
	type leasedQueue interface {
		Queue
		Leaser
	}
	type restartStore interface {
		Saver
		storeCaps
		Recent(context.Context, memory.Identity, int) ([]memory.Message, error)
	}
	stores := map[string]func(t *testing.T) (leasedQueue, restartStore){
		"sqlite": func(t *testing.T) (leasedQueue, restartStore) {
			s := mustSQLite(t)
			return s.Outbox(), s
		},
		"postgres+redis": func(t *testing.T) (leasedQueue, restartStore) {
			q, _ := mustRedisQueue(t, testenv.RedisPrefix(t))
			return q, mustPostgres(t)
		},
	}
	for name, open := range stores {
		for _, next := range []string{"same name", "other process"} {
			t.Run(name+"/"+next, func(t *testing.T) {
				q, store := open(t)
				ctx := context.Background()
				ex := func(i int) memory.Exchange {
					return exchange(t, NewExchangeID(), fmt.Sprint("q", i), fmt.Sprint("a", i))
				}
				enqueue(t, q, ex(1))
				enqueue(t, q, ex(2))
				if held, _, err := q.Lease(ctx, "w1", 50*time.Millisecond); err != nil || !held {
					t.Fatalf("lease = %v, %v", held, err)
				}
				if ds, err := q.Claim(ctx, "w1", 10, time.Hour, 0); err != nil || len(ds) != 2 {
					t.Fatalf("claimed %d, %v", len(ds), err)
				}
				enqueue(t, q, ex(3))
				opts := fastWorker() // consumer w1
				opts.StaleAfter = time.Hour
				if next == "other process" {
					opts.Consumer = "w2"
				}
				opts.Lease = q
				mustRunWorker(t, NewWorker(q, store, nil, workerWithStore(opts, store)))
				// Not waitFor: what was stored by the deadline tells what went wrong.
				drained := func() bool {
					n, err := q.Pending(ctx)
					return err == nil && n == 0
				}
				for deadline := time.Now().Add(60 * time.Second); !drained() && time.Now().Before(deadline); {
					time.Sleep(2 * time.Millisecond)
				}
				if got, want := strings.Join(texts(t, store, ex(0).Identity), " "), "q1 a1 q2 a2 q3 a3"; got != want {
					t.Fatalf("stored %q, want %q", got, want)
				}
			})
		}
	}
}

// TestStoppedWorkerGivesUpItsLease: a worker that stops (its process shuts
// down) gives its lease up, so that the next worker — the process
// restarted, another one — drains the queue at once instead of waiting
// for the lease to run out. On both stores.
func TestStoppedWorkerGivesUpItsLease(t *testing.T) {
	type leasedQueue interface {
		Queue
		Leaser
	}
	queues := map[string]func(t *testing.T) leasedQueue{
		"sqlite": func(t *testing.T) leasedQueue { return mustSQLite(t).Outbox() },
		"redis": func(t *testing.T) leasedQueue {
			q, _ := mustRedisQueue(t, testenv.RedisPrefix(t))
			return q
		},
	}
	for name, open := range queues {
		t.Run(name, func(t *testing.T) {
			q := open(t)
			opts := fastWorker()
			opts.Lease = q
			opts.Block = time.Second // the lease lasts 5 seconds
			saver := newFakeSaver()
			w := NewWorker(q, saver, nil, opts)
			enqueue(t, q, exchange(t, NewExchangeID(), "q1", "a1"))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			waitFor(t, "the worker drained the queue", func() bool { return len(saver.ids()) == 1 })
			if held, _, err := q.Lease(context.Background(), "other", time.Minute); err != nil || held {
				t.Fatalf("another took the running worker's lease (%v)", err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			held, taken, err := q.Lease(context.Background(), "other", time.Minute)
			if err != nil || !held || !taken {
				t.Fatalf("after the worker stopped: Lease = held %v, taken %v, %v; want the lease free", held, taken, err)
			}
		})
	}
}
