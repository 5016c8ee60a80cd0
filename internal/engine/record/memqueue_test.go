package record

import (
	"context"
	"errors"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.Queue = (*MemoryQueue)(nil)

// TestMemoryQueueContract: the enrichment queue of a deployment without a
// durable one keeps the durable queues' contract, but for surviving a
// restart.
func TestMemoryQueueContract(t *testing.T) {
	storetest.RunQueue(t, func(t *testing.T) storetest.Queue { return NewMemoryQueue(0) })
}

// TestMemoryQueueBatchAllOrNothing: a batch that does not fit in a full
// queue is refused whole (memory.ErrUnavailable), none of it kept.
func TestMemoryQueueBatchAllOrNothing(t *testing.T) {
	q := NewMemoryQueue(3)
	ctx := context.Background()
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("c"), []byte("d")}); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("EnqueueBatch past the limit = %v, want memory.ErrUnavailable", err)
	}
	if n, err := q.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("Pending = %d, %v; want the first batch's 2", n, err)
	}
}
