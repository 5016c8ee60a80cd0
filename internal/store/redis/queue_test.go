package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

var _ storetest.Queue = (*Queue)(nil)

// mustClient returns a client for the test Redis, closed when the test ends.
func mustClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c, err := NewClient(testenv.RedisURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// mustQueue opens a queue on a stream of its own.
func mustQueue(tb testing.TB, cfg QueueConfig) *Queue {
	tb.Helper()
	rdb := mustClient(tb)
	cfg.Prefix = testenv.RedisPrefix(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := NewQueue(ctx, rdb, cfg)
	if err != nil {
		tb.Fatalf("NewQueue: %v", err)
	}
	return q
}

func TestQueueContract(t *testing.T) {
	storetest.RunQueue(t, func(t *testing.T) storetest.Queue { return mustQueue(t, QueueConfig{}) })
}

func TestNewQueueIsIdempotent(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{Stream: "s", Group: "g"})
	if err := q.Enqueue(ctx, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	// A second replica opening the same queue must not reset the group.
	again, err := NewQueue(ctx, q.rdb, QueueConfig{Prefix: q.legacy[:len(q.legacy)-1], Stream: "s", Group: "g"})
	if err != nil {
		t.Fatalf("second NewQueue: %v", err)
	}
	ds, err := again.Claim(ctx, "w", 10, time.Hour, 0)
	if err != nil || len(ds) != 1 || string(ds[0].Payload) != "kept" {
		t.Fatalf("claim through the second queue = %+v, %v; want [kept]", ds, err)
	}
}

func TestQueueMaxLenTrims(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{MaxLen: 10})
	for i := range 1000 {
		if err := q.Enqueue(ctx, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := q.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole macro nodes (100 entries by default), never below the cap.
	if n < 10 || n > 200 {
		t.Fatalf("Pending after 1000 enqueues with MaxLen 10 = %d, want about 10 (at most 200)", n)
	}
}

func TestQueueRecreatesLostGroup(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	if err := q.rdb.Del(ctx, q.stream).Err(); err != nil { // as after a Redis restart without persistence
		t.Fatal(err)
	}
	if _, err := q.Claim(ctx, "w", 1, time.Hour, time.Millisecond); err != nil {
		t.Fatalf("Claim after the group vanished: %v", err)
	}
	if err := q.Enqueue(ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Claim(ctx, "w", 1, time.Hour, time.Millisecond)
	if err != nil || len(ds) != 1 || string(ds[0].Payload) != "after" {
		t.Fatalf("Claim = %+v, %v; want [after]", ds, err)
	}
}

func TestClaimTopsUpStaleWithNew(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	for _, p := range []string{"old", "new1", "new2"} {
		if err := q.Enqueue(ctx, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := q.Claim(ctx, "crashed", 1, time.Hour, 0); err != nil || len(ds) != 1 {
		t.Fatalf("first claim = %+v, %v", ds, err)
	}
	// Wait (polling) until the abandoned entry has been idle for 5ms.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pend, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.stream, Group: q.group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(pend) == 1 && pend[0].Idle >= 5*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending list = %+v; want one entry idle for 5ms", pend)
		}
	}
	ds, err := q.Claim(ctx, "w", 2, 5*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || string(ds[0].Payload) != "old" || ds[0].Attempts != 2 || string(ds[1].Payload) != "new1" || ds[1].Attempts != 1 {
		t.Fatalf("claim = %+v; want the stale entry (attempt 2) then new1 (attempt 1)", ds)
	}
}

// BenchmarkQueueCycle is a worker's cycle on the capture queue against
// the test Redis: a batch of 32 turns of 4 KiB queued one by one
// (EnqueueTurn), claimed in one Claim and acknowledged in one Ack.
func BenchmarkQueueCycle(b *testing.B) {
	ctx := context.Background()
	q := mustQueue(b, QueueConfig{})
	const batch = 32
	payload := make([]byte, 4096)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	b.SetBytes(batch * int64(len(payload)))
	for b.Loop() {
		for i := range batch {
			if err := q.EnqueueTurn(ctx, fmt.Sprint("conv-", i%4), payload); err != nil {
				b.Fatal(err)
			}
		}
		ds, err := q.Claim(ctx, "w", batch, time.Hour, 0)
		if err != nil || len(ds) != batch {
			b.Fatalf("Claim = %d, %v", len(ds), err)
		}
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.ID
		}
		if err := q.Ack(ctx, ids...); err != nil {
			b.Fatal(err)
		}
	}
}

var (
	_ storetest.Leaser    = (*Queue)(nil)
	_ storetest.KeyLeases = (*Leases)(nil)
)

// twoQueues opens a queue twice over one stream, with a client each, as
// two processes do.
func twoQueues(t *testing.T) (a, b *Queue) {
	t.Helper()
	prefix := testenv.RedisPrefix(t)
	open := func() *Queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q, err := NewQueue(ctx, mustClient(t), QueueConfig{Prefix: prefix, Stream: "enrich"})
		if err != nil {
			t.Fatalf("NewQueue: %v", err)
		}
		return q
	}
	return open(), open()
}

func TestQueueLeaseContract(t *testing.T) {
	storetest.RunLeaser(t, func(t *testing.T) (storetest.Leaser, storetest.Leaser) { return twoQueues(t) })
}

func TestConversationLeasesContract(t *testing.T) {
	storetest.RunKeyLeases(t, func(t *testing.T) (storetest.KeyLeases, storetest.KeyLeases) {
		a, b := twoQueues(t)
		return a.Leases(), b.Leases()
	})
}

// TestConversationLeasesBesideTheQueueLease: the conversations' leases
// never touch the queue's own lease, nor it theirs.
func TestConversationLeasesBesideTheQueueLease(t *testing.T) {
	ctx := context.Background()
	a, b := twoQueues(t)
	if held, _, err := a.Lease(ctx, "a", time.Hour); err != nil || !held {
		t.Fatalf("queue lease: held %v, %v", held, err)
	}
	if held, err := b.Leases().Lease(ctx, "b", time.Hour, "k"); err != nil || !held[0] {
		t.Fatalf("conversation lease under the queue's: %v, %v", held, err)
	}
	if err := a.Leases().Release(ctx, "a", "k"); err != nil {
		t.Fatal(err)
	}
	if held, _, err := a.Lease(ctx, "a", time.Hour); err != nil || !held {
		t.Fatalf("queue lease after a conversation's release: held %v, %v", held, err)
	}
}
