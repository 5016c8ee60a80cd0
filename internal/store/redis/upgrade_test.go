package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/testenv"
)

// upgradeQueue opens a queue named capture under a prefix of its own and
// returns it with the key of the stream older builds read and write: the
// configured prefix and name, nothing more.
func upgradeQueue(t *testing.T, cfg QueueConfig) (q *Queue, legacy string) {
	t.Helper()
	cfg.Prefix = testenv.RedisPrefix(t)
	q, err := NewQueue(context.Background(), mustClient(t), cfg)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	return q, cfg.Prefix + "capture"
}

// oldConsumerReads reads new entries the way a consumer of an older
// build does: it creates its group on the configured stream, as its
// NewQueue does, then reads with XREADGROUP > (expecting the payload
// inline in field p). It returns what it was given.
func oldConsumerReads(t *testing.T, rdb redis.UniversalClient, legacy, group string) []redis.XMessage {
	t.Helper()
	err := rdb.XGroupCreateMkStream(context.Background(), legacy, group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		t.Fatalf("old build's XGROUP CREATE: %v", err)
	}
	streams, err := rdb.XReadGroup(context.Background(), &redis.XReadGroupArgs{
		Group: group, Consumer: "old-build", Streams: []string{legacy, ">"}, Count: 100, Block: -1,
	}).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("old consumer's XREADGROUP: %v", err)
	}
	var out []redis.XMessage
	for _, s := range streams {
		out = append(out, s.Messages...)
	}
	return out
}

// TestOldConsumersNeverSeeNewEntries: during a rolling upgrade a consumer
// of an older build (same stream name, same group) reads none of the
// entries this build queues — it would find no inline payload, discard
// the entry as undecodable and acknowledge it, losing the turn — while
// this build's consumers get every one, in order.
func TestOldConsumersNeverSeeNewEntries(t *testing.T) {
	ctx := context.Background()
	q, legacy := upgradeQueue(t, QueueConfig{})
	var want []string
	for i := range 5 {
		p := fmt.Sprintf("turn %d of x", i)
		if err := q.EnqueueTurn(ctx, "x", []byte(p)); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("batch 1"), []byte("batch 2")}); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, []byte("single")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "batch 1", "batch 2", "single")
	if got := oldConsumerReads(t, q.rdb, legacy, q.group); len(got) > 0 {
		t.Fatalf("an old consumer read %d of this build's entries (first: %v); it would discard them as undecodable", len(got), got[0].Values)
	}
	if got := drain(t, q); !slices.Equal(got, want) {
		t.Fatalf("this build drained %q, want %q", got, want)
	}
	if got := queuedOf(t, q, "x"); got[0] {
		t.Fatal("x still queued after its turns were acknowledged")
	}
}

// TestNewBuildDrainsOldProducersStream: entries an older build queues on
// the configured stream during a rolling upgrade (payload inline, turns
// counted in its counts) are delivered by this build, a conversation's
// turns in the order they were queued whichever build queued them; a
// conversation with turns in either stream is queued; Purge reaches both
// streams; acknowledging uncounts in both.
func TestNewBuildDrainsOldProducersStream(t *testing.T) {
	ctx := context.Background()
	q, legacy := upgradeQueue(t, QueueConfig{})
	old := func(payload, conv string) {
		t.Helper()
		values := []any{payloadField, payload}
		if conv != "" {
			values = append(values, convField, conv)
		}
		_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAdd(ctx, &redis.XAddArgs{Stream: legacy, Values: values, MaxLen: 100000, Approx: true})
			if conv != "" {
				p.HIncrBy(ctx, legacy+":queued", conv, 1)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each write lands in a later millisecond than the one before, as a
	// conversation's turns do (one is sent after the previous answer).
	tick := func() { time.Sleep(2 * time.Millisecond) }
	old("x1", "x")
	tick()
	if err := q.EnqueueTurn(ctx, "x", []byte("x2")); err != nil {
		t.Fatal(err)
	}
	tick()
	old("x3", "x")
	tick()
	old("secret-y1", "y")
	tick()
	if err := q.EnqueueTurn(ctx, "z", []byte("z1")); err != nil {
		t.Fatal(err)
	}
	tick()
	old("x4", "x")
	tick()
	old("w1", "w")
	tick()
	// An entry of the build before this one: on the legacy stream, its
	// payload in a key of its own.
	if _, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, legacy+":p:REF", "x5", 0)
		p.XAdd(ctx, &redis.XAddArgs{Stream: legacy, Values: []any{refField, "REF", convField, "x"}})
		p.HIncrBy(ctx, legacy+":queued", "x", 1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := queuedOf(t, q, "x", "y", "z", "w", "v"); !slices.Equal(got, []bool{true, true, true, true, false}) {
		t.Fatalf("Queued(x, y, z, w, v) = %v, want all but v", got)
	}
	n, err := q.Purge(ctx, func(p []byte) bool { return strings.HasPrefix(string(p), "secret-") })
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1 (y's turn, on the older build's stream)", n, err)
	}
	if got := queuedOf(t, q, "y"); got[0] {
		t.Fatal("y still queued after its only turn was purged")
	}
	// One at a time, then the rest: the order holds across claims.
	var got []string
	for range 2 {
		ds, err := q.Claim(ctx, "new-build", 1, time.Hour, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim(1) = %d, %v", len(ds), err)
		}
		got = append(got, string(ds[0].Payload))
		if err := q.Ack(ctx, ds[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, drain(t, q)...)
	if want := []string{"x1", "x2", "x3", "z1", "x4", "w1", "x5"}; !slices.Equal(got, want) {
		t.Fatalf("drained %q, want %q", got, want)
	}
	if got := queuedOf(t, q, "x", "z", "w"); slices.Contains(got, true) {
		t.Fatalf("Queued(x, z, w) = %v after the queue drained", got)
	}
	if n, err := q.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("Pending = %d, %v after the queue drained", n, err)
	}
	if n, err := q.rdb.Exists(ctx, legacy+":p:REF", legacy+":queued", q.queuedKey()).Result(); err != nil || n != 0 {
		t.Fatalf("%d payload or count keys left after the queue drained (%v)", n, err)
	}
}

// TestLeaseIsSharedWithOlderBuilds: a worker of an older build holding
// the queue's lease keeps this build's workers off the queue, and the
// other way round, so two workers never split a backlog during an
// upgrade.
func TestLeaseIsSharedWithOlderBuilds(t *testing.T) {
	ctx := context.Background()
	q, legacy := upgradeQueue(t, QueueConfig{})
	if err := q.rdb.Set(ctx, legacy+":lease", "old-worker", time.Minute).Err(); err != nil { // the older build's Lease
		t.Fatal(err)
	}
	if held, _, err := q.Lease(ctx, "new-worker", time.Minute); err != nil || held {
		t.Fatalf("Lease while an older build's worker holds it = %v, %v; want not held", held, err)
	}
	if err := q.rdb.Del(ctx, legacy+":lease").Err(); err != nil {
		t.Fatal(err)
	}
	if held, taken, err := q.Lease(ctx, "new-worker", time.Minute); err != nil || !held || !taken {
		t.Fatalf("Lease once it is free = %v, %v, %v; want taken", held, taken, err)
	}
	if holder, err := q.rdb.Get(ctx, legacy+":lease").Result(); err != nil || holder != "new-worker" {
		t.Fatalf("the older build's lease key holds %q (%v); want new-worker", holder, err)
	}
}

// TestClaimTakesOverStaleEntriesOfBothStreams: entries a consumer of this
// build claimed from both streams and never acknowledged are taken over
// by the next one, with their delivery counts, oldest first.
func TestClaimTakesOverStaleEntriesOfBothStreams(t *testing.T) {
	ctx := context.Background()
	q, legacy := upgradeQueue(t, QueueConfig{})
	if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: legacy, Values: []any{payloadField, "old"}}).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if err := q.Enqueue(ctx, []byte("new")); err != nil {
		t.Fatal(err)
	}
	first, err := q.Claim(ctx, "crashed", 10, time.Hour, 0)
	if err != nil || len(first) != 2 {
		t.Fatalf("first Claim = %d, %v; want 2", len(first), err)
	}
	ds, err := q.Claim(ctx, "next", 10, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := payloadsOf(ds); !slices.Equal(p, []string{"old", "new"}) || ds[0].Attempts != 2 || ds[1].Attempts != 2 {
		t.Fatalf("taken over %+v; want old then new, second attempts", ds)
	}
	if err := q.Ack(ctx, ds[0].ID, ds[1].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("Pending = %d, %v after both were acknowledged", n, err)
	}
}
