package capture

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redisstore"
	"github.com/memgate/memgate/internal/testenv"
	"github.com/redis/go-redis/v9"
)

var _ Queue = (*redisstore.Queue)(nil)

// mustRedisQueue opens a Redis Streams queue under prefix on a client of its
// own, returning both; the client is closed when the test ends.
func mustRedisQueue(tb testing.TB, prefix string) (*redisstore.Queue, *redis.Client) {
	tb.Helper()
	rdb, err := redisstore.NewClient(testenv.RedisURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := redisstore.NewQueue(ctx, rdb, redisstore.QueueConfig{Prefix: prefix})
	if err != nil {
		tb.Fatalf("NewQueue: %v", err)
	}
	return q, rdb
}

func TestRedisCaptureSurvivesRedisLoss(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	store := mustSQLite(t)
	capQueue, capClient := mustRedisQueue(t, prefix)
	workQueue, _ := mustRedisQueue(t, prefix)
	id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"}
	stored := func() int {
		msgs, err := store.Recent(context.Background(), id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}

	c := mustCapturer(t, capQueue, store, nil, Options{OpTimeout: time.Second})
	w := NewWorker(workQueue, store, nil, fastWorker())
	mustRunWorker(t, w)
	const half = 10
	for i := range half {
		c.Capture(context.Background(), exchange(t, fmt.Sprintf("req-%02d", i), fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	waitFor(t, "first half stored through Redis", func() bool { return stored() == 2*half })
	if value(t, c.metrics.enqueued) != half {
		t.Fatalf("enqueued = %v, want %d", value(t, c.metrics.enqueued), half)
	}

	// Redis goes away for the capturer: the rest must be saved directly.
	if err := capClient.Close(); err != nil {
		t.Fatal(err)
	}
	for i := half; i < 2*half; i++ {
		c.Capture(context.Background(), exchange(t, fmt.Sprintf("req-%02d", i), fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	msgs, err := store.Recent(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	var want []string
	for i := range 2 * half {
		want = append(want, fmt.Sprint("q", i), fmt.Sprint("a", i))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stored %v\nwant %v", got, want)
	}
	if value(t, c.metrics.direct) != half || value(t, c.metrics.dropped) != 0 {
		t.Fatalf("fallback-direct = %v dropped = %v, want %d and 0", value(t, c.metrics.direct), value(t, c.metrics.dropped), half)
	}
	if n, err := workQueue.Pending(context.Background()); err != nil || n != 0 {
		t.Fatalf("redis pending = %d, %v", n, err)
	}
}
