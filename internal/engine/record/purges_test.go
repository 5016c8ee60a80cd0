package record

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// silentQueue is a MemoryQueue whose purges wait, saying nothing, until
// speak is closed (a Redis dropping packets), then go through.
type silentQueue struct {
	*MemoryQueue
	speak chan struct{}
}

func (q silentQueue) Purge(ctx context.Context, match func([]byte) bool) (int, error) {
	<-q.speak
	return q.MemoryQueue.Purge(ctx, match)
}

// slowQueue is a MemoryQueue whose purges read each entry after a pause
// (a long backlog on a busy store): slow, but answering.
type slowQueue struct {
	*MemoryQueue
	pause time.Duration
}

func (q slowQueue) Purge(ctx context.Context, match func([]byte) bool) (int, error) {
	return q.MemoryQueue.Purge(ctx, func(p []byte) bool { time.Sleep(q.pause); return match(p) })
}

// queueTurns queues n turns of alice said before the erasure at erasedAt.
func queueTurns(t *testing.T, q Queue, n int, erasedAt time.Time) {
	t.Helper()
	for i := range n {
		e := exchange(t, fmt.Sprint("gone-", i), "my code word", "Noted")
		e.Tenant, e.User, e.Conversation, e.At = "acme", "alice", "c1", erasedAt.Add(-time.Hour)
		if err := q.Enqueue(context.Background(), must(json.Marshal(e))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPurgeLeftPendingWhileTheQueueIsSilent: an erasure's purge the queue
// does not answer is left pending — the call returns, saying so, while
// the purge still waits on the queue — and goes through once the queue
// answers, in the background; memgate_erasure_purges_pending counts it
// meanwhile. Another erasure, with that purge still waiting, answers
// pending too.
func TestPurgeLeftPendingWhileTheQueueIsSilent(t *testing.T) {
	erasedAt := time.Now()
	q := silentQueue{NewMemoryQueue(0), make(chan struct{})}
	queueTurns(t, q.MemoryQueue, 2, erasedAt)
	c := mustCapturer(t, q, newFakeSaver(), nil, Options{PurgeWait: 100 * time.Millisecond})
	if n := c.PurgeErased(context.Background(), "acme", "alice", erasedAt); !n.Pending {
		t.Fatalf("PurgeErased on a silent queue = %+v, want it pending", n)
	}
	if v := c.purges.pending(); v != 1 {
		t.Fatalf("%d purges pending, want 1", v)
	}
	if n, _ := q.Pending(context.Background()); n != 2 {
		t.Fatalf("the silent queue holds %d entries, want both (nothing purged yet)", n)
	}
	if n := c.PurgeDeleted(context.Background(), memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}, erasedAt); !n.Pending {
		t.Fatalf("PurgeDeleted with a purge waiting on the silent queue = %+v, want it pending", n)
	}
	close(q.speak)
	waitFor(t, "the purges to go through", func() bool {
		n, _ := q.Pending(context.Background())
		return n == 0 && c.purges.pending() == 0
	})
}

// TestPurgeWaitsForAQueueThatAnswers: a purge whose queue answers
// slowly but steadily — reading its entries for longer than PurgeWait in
// all, never falling silent that long — is waited for: the call returns
// it done, with what it removed.
func TestPurgeWaitsForAQueueThatAnswers(t *testing.T) {
	erasedAt := time.Now()
	q := slowQueue{NewMemoryQueue(0), 50 * time.Millisecond}
	queueTurns(t, q.MemoryQueue, 60, erasedAt) // 3 s of reading
	c := mustCapturer(t, q, newFakeSaver(), nil, Options{PurgeWait: 2 * time.Second})
	if n := c.PurgeErased(context.Background(), "acme", "alice", erasedAt); n != (Purged{Turns: 60}) {
		t.Fatalf("PurgeErased on a slow queue = %+v, want its 60 turns, done", n)
	}
}

// TestPurgeFailedIsRetried: a purge the queue refuses is left pending,
// counted as failed, and retried in the background until it goes
// through.
func TestPurgeFailedIsRetried(t *testing.T) {
	erasedAt := time.Now()
	q := &failingPurges{MemoryQueue: NewMemoryQueue(0), fails: 2}
	queueTurns(t, q.MemoryQueue, 1, erasedAt)
	c := mustCapturer(t, q, newFakeSaver(), nil, Options{})
	if n := c.PurgeErased(context.Background(), "acme", "alice", erasedAt); !n.Pending {
		t.Fatalf("PurgeErased on a failing queue = %+v, want it pending", n)
	}
	waitFor(t, "the purge to go through", func() bool {
		n, _ := q.Pending(context.Background())
		return n == 0 && c.purges.pending() == 0
	})
	if f := q.failed(); f != 2 {
		t.Fatalf("the queue failed %d purges, want 2", f)
	}
}

// failingPurges is a MemoryQueue whose first fails purges fail.
type failingPurges struct {
	*MemoryQueue
	fails int

	mu    sync.Mutex
	tries int
}

func (q *failingPurges) Purge(ctx context.Context, match func([]byte) bool) (int, error) {
	q.mu.Lock()
	q.tries++
	fail := q.tries <= q.fails
	q.mu.Unlock()
	if fail {
		return 0, fmt.Errorf("purge: %w", memory.ErrUnavailable)
	}
	return q.MemoryQueue.Purge(ctx, match)
}

// failed is how many purges failed.
func (q *failingPurges) failed() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return min(q.tries, q.fails)
}

// countScrubs counts the Scrubs it is told of.
type countScrubs struct {
	mu sync.Mutex
	n  int
}

func (s *countScrubs) Scrub() { s.mu.Lock(); s.n++; s.mu.Unlock() }

func (s *countScrubs) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.n }

// TestPurgeScrubsOnceItGoesThrough: a purge the queue refuses twice
// before it goes through tells the Scrubber once, after it went through,
// not after each failed attempt (each would rewrite Redis's append-only
// file for nothing).
func TestPurgeScrubsOnceItGoesThrough(t *testing.T) {
	erasedAt := time.Now()
	q := &failingPurges{MemoryQueue: NewMemoryQueue(0), fails: 2}
	queueTurns(t, q.MemoryQueue, 1, erasedAt)
	scrub := &countScrubs{}
	c := mustCapturer(t, q, newFakeSaver(), nil, Options{Scrubber: scrub})
	if n := c.PurgeErased(context.Background(), "acme", "alice", erasedAt); !n.Pending {
		t.Fatalf("PurgeErased on a failing queue = %+v, want it pending", n)
	}
	waitFor(t, "the purge to go through", func() bool {
		n, _ := q.Pending(context.Background())
		return n == 0 && c.purges.pending() == 0
	})
	if n := scrub.count(); n != 1 {
		t.Fatalf("%d scrubs for a purge that failed twice, then went through; want 1", n)
	}
}
