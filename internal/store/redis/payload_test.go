package redis

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// mustNoCompression turns Redis's RDB compression off for the test (and
// back on after it), so that DUMP shows a stream node's bytes as they
// are in memory rather than LZF-compressed.
func mustNoCompression(t *testing.T, q *Queue) {
	t.Helper()
	ctx := context.Background()
	cfg, err := q.rdb.ConfigGet(ctx, "rdbcompression").Result()
	if err != nil {
		t.Fatalf("CONFIG GET rdbcompression: %v", err)
	}
	if cfg["rdbcompression"] != "yes" {
		return
	}
	if err := q.rdb.ConfigSet(ctx, "rdbcompression", "no").Err(); err != nil {
		t.Fatalf("CONFIG SET rdbcompression no: %v", err)
	}
	t.Cleanup(func() { _ = q.rdb.ConfigSet(context.Background(), "rdbcompression", "yes").Err() })
}

// keysOf returns every key of the queue's namespace (its stream's name
// and what follows it), with the DUMP of each: what Redis holds in
// memory and would write to a snapshot, deleted stream entries
// included.
func keysOf(t *testing.T, q *Queue) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	iter := q.rdb.Scan(ctx, 0, strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`).Replace(q.stream)+"*", 500).Iterator()
	for iter.Next(ctx) {
		dump, err := q.rdb.Dump(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", iter.Val(), err)
		}
		out[iter.Val()] = []byte(dump)
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
	mustNoCompression(t, q)
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
	n, err := q.Purge(ctx, func(p []byte) bool { return bytes.Contains(p, []byte(secret)) })
	if err != nil || n != 4 {
		t.Fatalf("Purge = %d, %v; want 4", n, err)
	}
	for key, dump := range keysOf(t, q) {
		if bytes.Contains(dump, []byte(secret)) {
			t.Errorf("after the purge, key %s still holds the erased text", key)
		}
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
