package redis

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// keysOf returns the keys of the queue's namespace: its stream and what
// is named after it.
func keysOf(t *testing.T, q *Queue) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	iter := q.rdb.Scan(ctx, 0, strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`).Replace(q.stream)+"*", 500).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}

// TestPurgeLeavesNoErasedTextInRedis: once Purge has removed the entries
// of an erased user, no key of the queue holds their text — not the
// stream's nodes (DUMP serialises them with their deleted entries), not
// any other key — while the entries kept around them, in the same stream
// node, claimed or not, still deliver theirs. The stream's entries carry
// no payload, only a reference to it.
func TestPurgeLeavesNoErasedTextInRedis(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	const secret = "erased-user-said-0x5EC2E7"
	kept := func(i int) string { return fmt.Sprintf("kept turn %d", i) }
	// Every way in: Enqueue, EnqueueTurn, EnqueueBatch, between kept entries.
	if err := q.Enqueue(ctx, []byte(kept(0))); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, []byte("1:"+secret)); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueTurn(ctx, "conv", []byte("2:"+secret)); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueTurn(ctx, "conv", []byte(kept(1))); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("3:" + secret), []byte(kept(2)), []byte("4:" + secret)}); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, []byte(kept(3))); err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(ctx, "w", 3, time.Hour, 0) // kept 0, the secret, the turn's secret
	if err != nil || len(claimed) != 3 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	if !bytes.Contains(testenv.RedisAtRest(t, q.rdb, q.stream), []byte(secret)) {
		t.Fatal("the text is not at rest before the purge: the test cannot see what it checks")
	}
	n, err := q.Purge(ctx, func(p []byte) bool { return bytes.Contains(p, []byte(secret)) })
	if err != nil || n != 4 {
		t.Fatalf("Purge = %d, %v; want 4", n, err)
	}
	if i := bytes.Index(testenv.RedisAtRest(t, q.rdb, q.stream), []byte(secret)); i >= 0 {
		t.Errorf("after the purge, Redis still holds the erased text (byte %d of the queue's keys dumped)", i)
	}
	entries, err := q.rdb.XRange(ctx, q.stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for field, v := range e.Values {
			if s, _ := v.(string); strings.Contains(s, "kept turn") {
				t.Errorf("stream entry %s holds its payload in field %q", e.ID, field)
			}
		}
	}
	// The kept entries still deliver their payloads, claimed or not.
	if err := q.Ack(ctx, claimed[1].ID, claimed[2].ID); err != nil {
		t.Fatal(err)
	}
	got := []string{string(claimed[0].Payload)}
	if err := q.Ack(ctx, claimed[0].ID); err != nil {
		t.Fatal(err)
	}
	rest, err := q.Claim(ctx, "w", 10, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rest {
		got = append(got, string(d.Payload))
	}
	if want := []string{kept(0), kept(1), kept(2), kept(3)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kept payloads %q, want %q", got, want)
	}
}

// payloadKeys counts the queue's payload keys.
func payloadKeys(t *testing.T, q *Queue) int {
	t.Helper()
	n := 0
	for _, key := range keysOf(t, q) {
		if strings.HasPrefix(key, q.stream+":p:") {
			n++
		}
	}
	return n
}

// drain claims and acknowledges everything, returning the payloads in
// the order claimed.
func drain(t *testing.T, q *Queue) []string {
	t.Helper()
	var got []string
	for {
		ds, err := q.Claim(context.Background(), "drain", 100, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return got
		}
		for _, d := range ds {
			got = append(got, string(d.Payload))
			if err := q.Ack(context.Background(), d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAckDeletesPayloadKeys: acknowledging entries deletes their payload
// keys with them; a drained queue leaves its stream alone in Redis.
func TestAckDeletesPayloadKeys(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueTurn(ctx, "x", []byte("c")); err != nil {
		t.Fatal(err)
	}
	if n := payloadKeys(t, q); n != 3 {
		t.Fatalf("payload keys after 3 enqueues = %d, want 3", n)
	}
	if got := drain(t, q); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("drained %q, want [a b c]", got)
	}
	if keys := keysOf(t, q); len(keys) != 1 {
		t.Fatalf("keys left after the queue drained: %d, want the stream alone", len(keys))
	}
}

// TestClaimReadsEntriesOfOlderBuilds: entries an older build queued on
// the legacy stream, with their payload inline, are delivered in order
// among the new ones, and purged and acknowledged as before (a turn's
// count included), during a rolling upgrade.
func TestClaimReadsEntriesOfOlderBuilds(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	old := func(payload string, conv string) {
		t.Helper()
		time.Sleep(2 * time.Millisecond) // the order across streams is by millisecond
		values := []any{payloadField, payload}
		if conv != "" {
			values = append(values, convField, conv)
			if err := q.rdb.HIncrBy(ctx, q.legacyQueuedKey(), conv, 1).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.legacy, Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	old("old-1", "")
	if err := q.Enqueue(ctx, []byte("new-2")); err != nil {
		t.Fatal(err)
	}
	old("old-3", "x")
	old("old-4", "y")
	if err := q.EnqueueTurn(ctx, "y", []byte("new-5")); err != nil {
		t.Fatal(err)
	}
	n, err := q.Purge(ctx, func(p []byte) bool { return string(p) == "old-3" })
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	if got := queuedOf(t, q, "x", "y"); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("after the purge: Queued(x, y) = %v, want y only", got)
	}
	if got := drain(t, q); fmt.Sprint(got) != "[old-1 new-2 old-4 new-5]" {
		t.Fatalf("drained %q, want [old-1 new-2 old-4 new-5]", got)
	}
	if keys := keysOf(t, q); len(keys) != 1 {
		t.Fatalf("keys left after the queue drained: %d, want the stream alone", len(keys))
	}
}

// TestClaimDropsEntriesWhosePayloadIsGone: an entry whose payload key no
// longer exists (purged after a worker read the entry, or lost) is not
// delivered and does not stall the queue: Claim acknowledges and deletes
// it, uncounting its turn, whether it is new or a stale claim taken over,
// and delivers the rest in order.
func TestClaimDropsEntriesWhosePayloadIsGone(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	for i, p := range []string{"a", "b", "c", "d"} {
		if err := q.EnqueueTurn(ctx, fmt.Sprint("conv-", i), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := q.rdb.XRange(ctx, q.stream, "-", "+").Result()
	if err != nil || len(entries) != 4 {
		t.Fatalf("XRANGE = %d entries, %v", len(entries), err)
	}
	lose := func(i int) {
		t.Helper()
		ref, _ := entries[i].Values[refField].(string)
		if ref == "" {
			t.Fatalf("entry %d has no payload reference: %v", i, entries[i].Values)
		}
		if n, err := q.rdb.Del(ctx, q.payloadKey(ref)).Result(); err != nil || n != 1 {
			t.Fatalf("DEL payload key of entry %d = %d, %v", i, n, err)
		}
	}
	first, err := q.Claim(ctx, "crashed", 1, time.Hour, 0) // a, abandoned
	if err != nil || len(first) != 1 || string(first[0].Payload) != "a" {
		t.Fatalf("first claim = %+v, %v; want [a]", first, err)
	}
	lose(0) // a claimed entry's payload
	lose(2) // a new entry's payload
	got, err := q.Claim(ctx, "w", 10, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := payloadsOf(got); fmt.Sprint(p) != "[b d]" {
		t.Fatalf("claimed %q, want [b d]", p)
	}
	if n, err := q.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("Pending = %d, %v; want 2 (b and d)", n, err)
	}
	if q := queuedOf(t, q, "conv-0", "conv-1", "conv-2", "conv-3"); !slices.Equal(q, []bool{false, true, false, true}) {
		t.Fatalf("Queued = %v, want conv-1 and conv-3", q)
	}
	pend, err := q.rdb.XPending(ctx, q.stream, q.group).Result()
	if err != nil || pend.Count != 2 {
		t.Fatalf("group pending list = %+v, %v; want b and d", pend, err)
	}
}

// payloadsOf projects deliveries to their payloads.
func payloadsOf(ds []memory.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Payload)
	}
	return out
}

// TestMaxLenTrimDeletesPayloadKeys: trimming the stream to MaxLen deletes
// the payload keys of the entries it trims and uncounts their turns; no
// payload outlives its entry.
func TestMaxLenTrimDeletesPayloadKeys(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{MaxLen: 10})
	for i := range 150 {
		if err := q.EnqueueTurn(ctx, fmt.Sprint("conv-", i), fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.EnqueueBatch(ctx, [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	n, err := q.Pending(ctx)
	if err != nil || n != 10 {
		t.Fatalf("Pending = %d, %v; want 10", n, err)
	}
	if keys := payloadKeys(t, q); keys != 10 {
		t.Fatalf("payload keys = %d, want 10 (one per entry left)", keys)
	}
	if counts, err := q.rdb.HLen(ctx, q.queuedKey()).Result(); err != nil || counts != 8 {
		t.Fatalf("counted conversations = %d, %v; want the 8 turns left", counts, err)
	}
	if got := drain(t, q); fmt.Sprint(got) != "[142 143 144 145 146 147 148 149 x y]" {
		t.Fatalf("drained %q, want the newest 10 in order", got)
	}
}
