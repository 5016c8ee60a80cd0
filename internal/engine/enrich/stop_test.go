package enrich

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
)

// TestStoppingRoundLeavesFailedPartsQueued: a round that runs while its
// enricher stops (Run's ctx cancelled) and whose hook fails does not give
// the part up for good: its entries stay unacknowledged, redelivered to
// the next run, rather than acknowledged without their enrichment only
// because the process was stopping.
func TestStoppingRoundLeavesFailedPartsQueued(t *testing.T) {
	q := record.NewMemoryQueue(0)
	enqueueEnriched(t, q, "a", "a0")
	enqueueEnriched(t, q, "b", "b0")
	failing := &scriptedHook{fail: func(int64) bool { return true }}
	e := NewEnricher(q, []record.Hook{failing}, nil, EnrichOptions{HookTimeout: 30 * time.Second, BackoffBase: time.Millisecond})
	ds, err := q.Claim(context.Background(), "a", 10, time.Hour, 0)
	if err != nil || len(ds) != 2 {
		t.Fatalf("claimed %d entries (%v), want 2", len(ds), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the enricher is stopping
	e.round(ctx, ds, nil)
	if n := pending(t, q); n != 2 {
		t.Errorf("%d entries left unacknowledged after a stopping round whose hook failed, want 2 (redelivered to the next run)", n)
	}
}
