package redis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// queuedOf reports Queued for convs, failing the test on an error.
func queuedOf(t *testing.T, q *Queue, convs ...string) []bool {
	t.Helper()
	got, err := q.Queued(context.Background(), convs...)
	if err != nil {
		t.Fatalf("Queued: %v", err)
	}
	return got
}

// TestEnqueueTurnCountsUntilAcknowledged: a conversation is counted as
// queued from its turn's enqueue until the entry is acknowledged, however
// many turns it has there and however many times an entry is acknowledged;
// a drained stream leaves no counts behind.
func TestEnqueueTurnCountsUntilAcknowledged(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	if got := queuedOf(t, q, "x", "y"); !slices.Equal(got, []bool{false, false}) {
		t.Fatalf("empty queue: Queued = %v", got)
	}
	for _, conv := range []string{"x", "x", "y"} {
		if err := q.EnqueueTurn(ctx, conv, []byte("turn of "+conv)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Enqueue(ctx, []byte("untracked")); err != nil {
		t.Fatal(err)
	}
	if got := queuedOf(t, q, "x", "y", "z"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("Queued = %v, want x and y", got)
	}
	ds, err := q.Claim(ctx, "w", 10, time.Hour, 0)
	if err != nil || len(ds) != 4 {
		t.Fatalf("Claim = %d, %v", len(ds), err)
	}
	// x's first turn and y's, each acknowledged twice (a redelivery).
	for range 2 {
		if err := q.Ack(ctx, ds[0].ID, ds[2].ID); err != nil {
			t.Fatal(err)
		}
	}
	if got := queuedOf(t, q, "x", "y"); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("after one of x's turns and y's: Queued = %v, want x only", got)
	}
	if err := q.Ack(ctx, ds[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := queuedOf(t, q, "x"); got[0] {
		t.Fatal("x still counted after its turns were acknowledged")
	}
	if err := q.Ack(ctx, ds[3].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := q.rdb.Exists(ctx, q.queuedKey()).Result(); err != nil || n != 0 {
		t.Fatalf("counts left in Redis after the stream drained (%d, %v)", n, err)
	}
}

// TestQueuedForgetsStaleCounts: counts whose entries left the stream
// without being uncounted (acknowledged by an older version, trimmed) are
// not read as queued turns once the stream is empty, and are deleted.
func TestQueuedForgetsStaleCounts(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	if err := q.EnqueueTurn(ctx, "x", []byte("turn")); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Claim(ctx, "w", 10, time.Hour, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Claim = %d, %v", len(ds), err)
	}
	// An older gateway's ack: XACK and XDEL, no uncounting.
	if err := q.rdb.XAck(ctx, q.stream, q.group, ds[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := q.rdb.XDel(ctx, q.stream, ds[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if got := queuedOf(t, q, "x"); got[0] {
		t.Fatal("a stale count reads as a queued turn")
	}
	if n, err := q.rdb.Exists(ctx, q.queuedKey()).Result(); err != nil || n != 0 {
		t.Fatalf("stale counts left in Redis (%d, %v)", n, err)
	}
}

// BenchmarkQueued is the check a Capturer makes before a direct save,
// against the test Redis, next to a PING (one bare round trip).
func BenchmarkQueued(b *testing.B) {
	ctx := context.Background()
	q := mustQueue(b, QueueConfig{})
	if err := q.EnqueueTurn(ctx, "queued", []byte("turn")); err != nil {
		b.Fatal(err)
	}
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := q.rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("queued", func(b *testing.B) {
		for b.Loop() {
			if _, err := q.Queued(ctx, `["t1","u1","c1"]`); err != nil {
				b.Fatal(err)
			}
		}
	})
}
