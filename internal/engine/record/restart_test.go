package record

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
