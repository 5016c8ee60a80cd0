package enrich

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// forgettingQueue is a queue whose Claim is followed by an erasure's
// Forget, before the round's hooks start.
type forgettingQueue struct {
	*record.MemoryQueue
	forget func()
}

func (q forgettingQueue) Claim(ctx context.Context, consumer string, n int, stale, block time.Duration) ([]memory.Delivery, error) {
	ds, err := q.MemoryQueue.Claim(ctx, consumer, n, stale, block)
	if len(ds) > 0 {
		q.forget()
	}
	return ds, err
}

// TestRoundsHooksSeeTheEpochOfTheirClaim: the hooks of a round run under
// the erasures' count (cache.EpochOf) taken before its batch was claimed,
// not when they start, so a user erased between the two has nothing of
// that batch cached (the hooks' caches compare their forgets with it).
func TestRoundsHooksSeeTheEpochOfTheirClaim(t *testing.T) {
	c := cache.New[cache.Key[int], int]("epoch-test", 1<<20, func(cache.Key[int], int) int { return 8 })
	mq := record.NewMemoryQueue(0)
	enqueueEnriched(t, mq, "a", "my new address is 12 Rua Augusta")
	q := forgettingQueue{mq, func() { c.Forget("t", "u") }}
	var mu sync.Mutex
	var seen []uint64
	before := cache.Epoch()
	hook := record.HookFunc(func(ctx context.Context, _ []memory.Exchange, _ []memory.SaveResult) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, cache.EpochOf(ctx))
		return nil
	})
	e := NewEnricher(q, []record.Hook{hook}, nil, EnrichOptions{Block: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the batch enriched", func() bool { return pending(t, mq) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the hook ran %d times, want 1", len(seen))
	}
	if seen[0] >= cache.Epoch() || seen[0] < before {
		t.Fatalf("the hook ran at epoch %d, want the one before the claim (at least %d, before the forget: now %d)", seen[0], before, cache.Epoch())
	}
	if c.PutSince(seen[0], cache.Key[int]{Tenant: "t", User: "u"}, 1) {
		t.Fatal("a value of the user forgotten after the claim was kept")
	}
}
