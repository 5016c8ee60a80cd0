package record

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

var _ Queue = (*redis.Queue)(nil)

// mustRedisQueue opens a Redis Streams queue under prefix on a client of its
// own, returning both; the client is closed when the test ends.
func mustRedisQueue(tb testing.TB, prefix string) (*redis.Queue, *goredis.Client) {
	tb.Helper()
	rdb, err := redis.NewClient(testenv.RedisURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := redis.NewQueue(ctx, rdb, redis.QueueConfig{Prefix: prefix})
	if err != nil {
		tb.Fatalf("NewQueue: %v", err)
	}
	return q, rdb
}

// flakySaver fails every save while down is set.
type flakySaver struct {
	Saver
	mu   sync.Mutex
	down bool
}

func (f *flakySaver) set(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

func (f *flakySaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return memory.SaveResult{}, fmt.Errorf("store: %w", memory.ErrUnavailable)
	}
	return f.Saver.SaveExchange(ctx, ex)
}

// TestRedisQueueHoldsTurnsWhileStoreIsDown: with the store down, turns go
// to the Redis queue; when it is back, the worker stores them and the
// turns captured meanwhile, in the order they were sent.
func TestRedisQueueHoldsTurnsWhileStoreIsDown(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	store := mustSQLite(t)
	flaky := &flakySaver{Saver: store}
	capQueue, _ := mustRedisQueue(t, prefix)
	workQueue, _ := mustRedisQueue(t, prefix)
	id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"}
	c := mustCapturer(t, capQueue, flaky, nil, Options{OpTimeout: time.Second})
	const n = 20
	flaky.set(true)
	for i := range n / 2 {
		c.Capture(context.Background(), exchange(t, "same-request-id", fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	if got := value(t, c.metrics.queued); got != n/2 {
		t.Fatalf("queued = %v, want %d", got, n/2)
	}
	flaky.set(false)
	for i := n / 2; i < n; i++ {
		c.Capture(context.Background(), exchange(t, "same-request-id", fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	wo := fastWorker()
	wo.Lease = workQueue
	w := NewWorker(workQueue, flaky, nil, wo)
	mustRunWorker(t, w)
	waitFor(t, "every turn stored", func() bool {
		msgs, err := store.Recent(context.Background(), id, 1000)
		return err == nil && len(msgs) == 2*n
	})
	msgs, err := store.Recent(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	for i := range n {
		want = append(want, fmt.Sprint("q", i), fmt.Sprint("a", i))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stored %v\nwant %v", got, want)
	}
	if value(t, c.metrics.dropped) != 0 {
		t.Fatalf("dropped = %v", value(t, c.metrics.dropped))
	}
	waitFor(t, "redis drained", func() bool {
		n, err := workQueue.Pending(context.Background())
		return err == nil && n == 0
	})
}

// TestRedisBreakerSkipLosesOneEnrichmentOnly: an enrichment enqueue the
// Redis breaker skipped (redis.ErrBreakerOpen: Redis timed out on another
// call a moment ago) loses that batch's enrichment, counted, and nothing
// more: it is not a hang of this queue, so the batches after it, once the
// breaker has closed, are queued for enrichment at once rather than being
// skipped for OpTimeout. Before, the skip counted as a timeout and set
// the lane's enrichment aside for OpTimeout, outliving the breaker.
func TestRedisBreakerSkipLosesOneEnrichmentOnly(t *testing.T) {
	eq := newFakeQueue()
	eq.setFail(fmt.Errorf("redis: enqueue batch: %w", redis.ErrBreakerOpen))
	c := mustCapturer(t, nil, newFakeSaver(), nil, Options{Lanes: 1, Batch: 1, Enrich: eq, OpTimeout: time.Minute})
	if !c.Capture(context.Background(), exchange(t, "r1", "hi", "hello")) {
		t.Fatal("the first turn was not stored")
	}
	waitFor(t, "the skipped enrichment counted", func() bool { return value(t, c.metrics.enrichLost) >= 1 })
	eq.setFail(nil) // the breaker closed
	if !c.Capture(context.Background(), exchange(t, "r2", "hi again", "hello again")) {
		t.Fatal("the second turn was not stored")
	}
	waitFor(t, "the second turn queued for enrichment", func() bool { return len(eq.payloads()) == 1 })
	if got := value(t, c.metrics.enrichLost); got != 1 {
		t.Errorf("exchanges left unenriched = %v, want 1 (the skipped one)", got)
	}
}
