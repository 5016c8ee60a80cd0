package record

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/testenv"
)

// lostFenceStore is a PostgreSQL store whose saves, while refuse is set,
// are refused for a lost chat lock (memory.ErrLockLost), as behind a
// deployment where the chat locks never hold (a pooler that does not keep
// a session's locks).
type lostFenceStore struct {
	*postgres.Store
	refuse atomic.Bool
}

func (s *lostFenceStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	if s.refuse.Load() {
		return memory.SaveResult{}, memory.ErrLockLost
	}
	return s.Store.SaveExchange(ctx, ex)
}

// TestWorkerReportsAChatLockThatNeverHolds: a queued chat turn whose
// chat's lock cannot be taken, or is lost before every save, for longer
// than WorkerOptions.LockStuckAfter is reported (the gauge
// memgate_capture_worker_lock_stuck, failures{stage="chat_lock_stuck"})
// while the worker keeps it: never dropped nor set aside as a dead letter,
// it is stored once the lock holds, and the gauge falls back.
func TestWorkerReportsAChatLockThatNeverHolds(t *testing.T) {
	for _, how := range []string{"not taken", "lost"} {
		t.Run(how, func(t *testing.T) {
			pg := mustPostgresAt(t, testenv.PostgresURL(t))
			st := &lostFenceStore{Store: pg}
			locks := &flakyLocks{ChatLocker: pg}
			if how == "lost" {
				st.refuse.Store(true)
			} else {
				locks.fails = 1 << 30
			}
			_, next, _ := chatOf(t, "ana-"+NewExchangeID(), "chat-x")
			q := newFakeQueue()
			enqueue(t, q, next)
			o := workerWithStore(fastWorker(), pg)
			o.Chats, o.LockStuckAfter = NewChatLocks(locks), time.Second
			w := NewWorker(q, st, nil, o)
			mustRunWorker(t, w)
			waitLong(t, "the stuck turn reported", func() bool { return value(t, w.lockStuck) == 1 })
			if n := value(t, w.failures.WithLabelValues("chat_lock_stuck")); n != 1 {
				t.Errorf("failures{stage=chat_lock_stuck} = %v, want 1: reported once", n)
			}
			if n := pending(t, q); n != 1 {
				t.Fatalf("%d entries pending, want the turn kept", n)
			}
			if n := value(t, w.dead); n != 0 {
				t.Fatalf("%v dead letters, want none", n)
			}

			st.refuse.Store(false)
			locks.mu.Lock()
			locks.fails = 0
			locks.mu.Unlock()
			waitLong(t, "the turn stored once its lock holds", func() bool { return pending(t, q) == 0 })
			if n := value(t, w.saved); n != 1 {
				t.Errorf("%v saved, want 1", n)
			}
			if n := value(t, w.lockStuck); n != 0 {
				t.Errorf("memgate_capture_worker_lock_stuck = %v after the save, want 0", n)
			}
		})
	}
}
