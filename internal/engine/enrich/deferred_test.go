package enrich

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// heldElsewhere is a ConversationLeases under which another enricher holds
// every conversation: it records the keys of each Lease call.
type heldElsewhere struct {
	mu    sync.Mutex
	calls [][]string
}

func (h *heldElsewhere) Lease(_ context.Context, _ string, _ time.Duration, keys ...string) ([]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, slices.Clone(keys))
	return make([]bool, len(keys)), nil
}

func (h *heldElsewhere) Release(context.Context, string, ...string) error { return nil }

func (h *heldElsewhere) rounds() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// claimCounter is a queue that counts the entries claimed and not
// acknowledged: those an enricher holds.
type claimCounter struct {
	record.Queue
	mu      sync.Mutex
	claimed map[string]bool
}

func (q *claimCounter) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	ds, err := q.Queue.Claim(ctx, consumer, max, staleAfter, block)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range ds {
		q.claimed[d.ID] = true
	}
	return ds, err
}

func (q *claimCounter) Ack(ctx context.Context, ids ...string) error {
	q.mu.Lock()
	for _, id := range ids {
		delete(q.claimed, id)
	}
	q.mu.Unlock()
	return q.Queue.Ack(ctx, ids...)
}

func (q *claimCounter) held() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.claimed)
}

// TestEnricherBoundsWhatItKeeps: while another enricher holds the
// conversations of a backlog, an enricher keeps at most Batch of their
// entries (claimed, decoded, waiting for the holder's round); the rest
// stay in the queue, read once there is room. Each round leases a
// conversation once, however many of its entries it keeps.
func TestEnricherBoundsWhatItKeeps(t *testing.T) {
	const batch = 4
	q := &claimCounter{Queue: record.NewMemoryQueue(0), claimed: map[string]bool{}}
	for i := range 10 * batch {
		enqueueEnriched(t, q, fmt.Sprintf("c%d", i%2), fmt.Sprintf("turn %d", i))
	}
	leases := &heldElsewhere{}
	h := &recordingHook{}
	e := NewEnricher(q, []record.Hook{h}, nil, EnrichOptions{
		Batch: batch, Interval: time.Millisecond, Block: 5 * time.Millisecond, StaleAfter: time.Hour,
		Conversations: leases,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, "20 rounds", func() bool { return len(leases.rounds()) >= 20 })
	if n := q.held(); n > batch {
		t.Errorf("the enricher holds %d entries of conversations another enricher holds, want at most Batch (%d)", n, batch)
	}
	for i, keys := range leases.rounds() {
		if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
			t.Errorf("round %d leased %d keys, some twice: %q", i, len(keys), keys)
		}
	}
	if calls := h.snapshot(); len(calls) > 0 {
		t.Errorf("hooks ran %d times over conversations another enricher holds", len(calls))
	}
}
