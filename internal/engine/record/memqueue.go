package record

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// MemoryQueue is a bounded in-process Queue, for enrichment when no durable
// queue is configured (PostgreSQL without Redis): what it holds is lost with
// the process, which for enrichment only means facts, summaries and index
// entries that the next turns or a reindex make up for. Enqueue fails with
// memory.ErrUnavailable when it is full. It is safe for concurrent use.
type MemoryQueue struct {
	limit int

	mu      sync.Mutex
	next    int64
	order   []string // ids in enqueue order, acknowledged ones removed lazily
	entries map[string]*memEntry
	wake    chan struct{}
}

type memEntry struct {
	payload   []byte
	queuedAt  time.Time
	claimedAt time.Time
	attempts  int
}

// NewMemoryQueue returns an empty MemoryQueue holding at most limit entries
// (default 100000 for limit <= 0).
func NewMemoryQueue(limit int) *MemoryQueue {
	if limit <= 0 {
		limit = 100000
	}
	return &MemoryQueue{limit: limit, entries: map[string]*memEntry{}, wake: make(chan struct{})}
}

// Enqueue appends a payload.
func (q *MemoryQueue) Enqueue(ctx context.Context, payload []byte) error {
	return q.EnqueueBatch(ctx, [][]byte{payload})
}

// EnqueueBatch appends payloads in order, all of them or (the queue full)
// none.
func (q *MemoryQueue) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.entries)+len(payloads) > q.limit {
		return fmt.Errorf("memory queue full (%d entries): %w", q.limit, memory.ErrUnavailable)
	}
	for _, p := range payloads {
		q.next++
		id := strconv.FormatInt(q.next, 10)
		q.entries[id] = &memEntry{payload: slices.Clone(p), queuedAt: time.Now()}
		q.order = append(q.order, id)
	}
	close(q.wake)
	q.wake = make(chan struct{})
	return nil
}

// Claim returns up to max entries, claimed more than staleAfter ago or never,
// oldest first, waiting up to block for any.
func (q *MemoryQueue) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	deadline := time.Now().Add(block)
	for {
		q.mu.Lock()
		ds := q.claimLocked(max, staleAfter)
		wake := q.wake
		q.mu.Unlock()
		if len(ds) > 0 {
			return ds, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(wait, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("claim: %w", ctx.Err())
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (q *MemoryQueue) claimLocked(max int, staleAfter time.Duration) []memory.Delivery {
	now := time.Now()
	live := q.order[:0]
	var out []memory.Delivery
	for _, id := range q.order {
		e, ok := q.entries[id]
		if !ok {
			continue
		}
		live = append(live, id)
		if len(out) < max && (e.claimedAt.IsZero() || now.Sub(e.claimedAt) >= staleAfter) {
			e.claimedAt = now
			e.attempts++
			out = append(out, memory.Delivery{ID: id, Payload: e.payload, Attempts: e.attempts})
		}
	}
	q.order = live
	return out
}

// Ack removes entries.
func (q *MemoryQueue) Ack(ctx context.Context, ids ...string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		delete(q.entries, id)
	}
	return nil
}

// Pending reports how many entries are queued or claimed.
func (q *MemoryQueue) Pending(ctx context.Context) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.entries)), nil
}

// Oldest returns when the oldest entry not acknowledged was enqueued (the
// zero time: none).
func (q *MemoryQueue) Oldest(ctx context.Context) (time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var oldest time.Time
	for _, e := range q.entries {
		if oldest.IsZero() || e.queuedAt.Before(oldest) {
			oldest = e.queuedAt
		}
	}
	return oldest, nil
}

// Purge deletes the entries whose payload match reports true, claimed or
// not (see Queue).
func (q *MemoryQueue) Purge(ctx context.Context, match func(payload []byte) bool) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for id, e := range q.entries {
		if match(e.payload) {
			delete(q.entries, id)
			n++
		}
	}
	return n, nil
}
