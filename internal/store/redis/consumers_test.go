package redis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// consumers lists the group's consumers on q's stream.
func consumers(tb testing.TB, q *Queue) []string {
	tb.Helper()
	cs, err := q.rdb.XInfoConsumers(context.Background(), q.stream, q.group).Result()
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// idleFor reports whether every consumer of q's group on its stream has
// been idle for at least d.
func idleFor(tb testing.TB, q *Queue, d time.Duration) bool {
	tb.Helper()
	cs, err := q.rdb.XInfoConsumers(context.Background(), q.stream, q.group).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, c := range cs {
		if c.Idle < d {
			return false
		}
	}
	return true
}

// TestPruneConsumersKeepsThoseWithPendingEntries: the consumers of runs
// that stopped, idle and holding nothing, are removed; one holding
// entries it has not acknowledged is kept, however long idle, and its
// entries stay pending; none is removed before it has been idle long.
func TestPruneConsumersKeepsThoseWithPendingEntries(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	for _, p := range []string{"a", "b"} {
		if err := q.Enqueue(ctx, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	done, err := q.Claim(ctx, "stopped", 1, time.Hour, 0)
	if err != nil || len(done) != 1 {
		t.Fatalf("claim = %v, %v", done, err)
	}
	if err := q.Ack(ctx, done[0].ID); err != nil {
		t.Fatal(err)
	}
	if ds, err := q.Claim(ctx, "crashed", 1, time.Hour, 0); err != nil || len(ds) != 1 {
		t.Fatalf("claim = %v, %v", ds, err)
	}
	if n, err := q.PruneConsumers(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("PruneConsumers(1h) = %d, %v; want none removed", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !idleFor(t, q, time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the consumers never idle for 1ms")
		}
		time.Sleep(time.Millisecond)
	}
	if n, err := q.PruneConsumers(ctx, time.Millisecond); err != nil || n != 1 {
		t.Fatalf("PruneConsumers(1ms) = %d, %v; want 1 removed", n, err)
	}
	if got := consumers(t, q); !slices.Equal(got, []string{"crashed"}) {
		t.Errorf("consumers %q, want [crashed]", got)
	}
	if n, err := q.Pending(ctx); err != nil || n != 1 {
		t.Errorf("Pending = %d, %v; want the crashed consumer's entry", n, err)
	}
}
