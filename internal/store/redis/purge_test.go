package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPurgeUncountsItsTurns: purging turns uncounts their conversations
// in the step that deletes them, whether a worker claimed them or not,
// over more than one page of the stream: a conversation whose turns were
// all purged is no longer queued, one with turns left still is, and
// those turns are acknowledged as usual; the drained stream leaves no
// counts behind. A purged entry that was claimed leaves the group's
// pending list, so nothing reclaims it.
func TestPurgeUncountsItsTurns(t *testing.T) {
	ctx := context.Background()
	q := mustQueue(t, QueueConfig{})
	// 3 pages of turns: x's and z's interleaved, and one of y's first.
	if err := q.EnqueueTurn(ctx, "y", []byte("gone:y")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * purgePage {
		conv := "x"
		if i%2 == 1 {
			conv = "z"
		}
		if err := q.EnqueueTurn(ctx, conv, fmt.Appendf(nil, "%s:%d", map[string]string{"x": "gone", "z": "kept"}[conv], i)); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := q.Claim(ctx, "w", 3, time.Hour, 0) // y's and x's and z's first
	if err != nil || len(claimed) != 3 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	n, err := q.Purge(ctx, func(p []byte) bool { return strings.HasPrefix(string(p), "gone:") })
	if err != nil || n != 1+3*purgePage/2 {
		t.Fatalf("Purge = %d, %v; want %d", n, err, 1+3*purgePage/2)
	}
	if got := queuedOf(t, q, "x", "y", "z"); !slices.Equal(got, []bool{false, false, true}) {
		t.Fatalf("after the purge: Queued(x, y, z) = %v, want z only", got)
	}
	if got, err := q.rdb.HGetAll(ctx, q.queuedKey()).Result(); err != nil || len(got) != 1 || got["z"] != fmt.Sprint(3*purgePage/2) {
		t.Fatalf("counts after the purge = %v, %v; want z: %d", got, err, 3*purgePage/2)
	}
	pending, err := q.rdb.XPending(ctx, q.stream, q.group).Result()
	if err != nil || pending.Count != 1 {
		t.Fatalf("group pending list after the purge = %+v, %v; want z's claimed turn alone", pending, err)
	}
	// The worker acknowledges the batch it claimed, purged entries included.
	if err := q.Ack(ctx, claimed[0].ID, claimed[1].ID, claimed[2].ID); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for {
		ds, err := q.Claim(ctx, "w2", 100, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			rest = append(rest, string(d.Payload))
			if err := q.Ack(ctx, d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(rest) != 3*purgePage/2-1 || slices.ContainsFunc(rest, func(p string) bool { return !strings.HasPrefix(p, "kept:") }) {
		t.Fatalf("claimed after the purge: %q; want z's turns after its first", rest)
	}
	if n, err := q.rdb.Exists(ctx, q.queuedKey()).Result(); err != nil || n != 0 {
		t.Fatalf("counts left in Redis after the stream drained (%d, %v)", n, err)
	}
}
