package storetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// RunQueue runs the durable queue contract suite. open must return a fresh,
// empty queue for every call (a new SQLite file, a new Redis stream and
// consumer group) and register its own cleanup; each subtest opens one.
func RunQueue(t *testing.T, open func(t *testing.T) Queue) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, q Queue)
	}{
		{"EnqueueClaimAck", testEnqueueClaimAck},
		{"FIFOWithinMax", testFIFOWithinMax},
		{"BatchKeepsOrder", testBatchKeepsOrder},
		{"PendingCounts", testPendingCounts},
		{"OldestIsTheFirstNotAcked", testOldest},
		{"RedeliverAfterCrash", testRedeliverAfterCrash},
		{"AckedNeverReturns", testAckedNeverReturns},
		{"ClaimBlocksThenReturnsEmpty", testClaimBlocks},
		{"ClaimWakesOnEnqueue", testClaimWakes},
		{"PurgeDeletesWhatMatches", testPurge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

// short is the block duration of claims that expect nothing or something
// already enqueued.
const short = 20 * time.Millisecond

// never is a staleAfter long enough that no entry goes stale within a test.
const never = time.Hour

// mustEnqueue appends payloads in order.
func mustEnqueue(tb testing.TB, q Queue, payloads ...string) {
	tb.Helper()
	for _, p := range payloads {
		if err := q.Enqueue(testCtx(tb), []byte(p)); err != nil {
			tb.Fatalf("Enqueue(%q): %v", p, err)
		}
	}
}

// testBatchKeepsOrder: a batch is claimed in its order, after what was
// enqueued before it and before what comes after it.
func testBatchKeepsOrder(t *testing.T, q Queue) {
	mustEnqueue(t, q, "a")
	if err := q.EnqueueBatch(testCtx(t), [][]byte{[]byte("b"), []byte("c"), []byte("d")}); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	mustEnqueue(t, q, "e")
	var got []string
	for _, d := range mustClaim(t, q, "w", 10, never, short) {
		got = append(got, string(d.Payload))
	}
	if fmt.Sprint(got) != "[a b c d e]" {
		t.Fatalf("claimed %v, want [a b c d e]", got)
	}
}

// mustClaim claims and checks that max is respected.
func mustClaim(tb testing.TB, q Queue, consumer string, max int, staleAfter, block time.Duration) []memory.Delivery {
	tb.Helper()
	ds, err := q.Claim(testCtx(tb), consumer, max, staleAfter, block)
	if err != nil {
		tb.Fatalf("Claim(%s, %d): %v", consumer, max, err)
	}
	if len(ds) > max {
		tb.Fatalf("Claim(%s, %d) returned %d deliveries", consumer, max, len(ds))
	}
	return ds
}

// mustAck acknowledges deliveries.
func mustAck(tb testing.TB, q Queue, ds ...memory.Delivery) {
	tb.Helper()
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	if err := q.Ack(testCtx(tb), ids...); err != nil {
		tb.Fatalf("Ack(%v): %v", ids, err)
	}
}

// assertPending checks the queue's pending count.
func assertPending(tb testing.TB, q Queue, want int64) {
	tb.Helper()
	n, err := q.Pending(testCtx(tb))
	if err != nil {
		tb.Fatalf("Pending: %v", err)
	}
	if n != want {
		tb.Fatalf("Pending = %d, want %d", n, want)
	}
}

// payloads projects deliveries to their payloads.
func payloads(ds []memory.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Payload)
	}
	return out
}

func testEnqueueClaimAck(t *testing.T, q Queue) {
	binary := string([]byte{0, 1, 0xff, '\n', '"'})
	mustEnqueue(t, q, `{"id":"a"}`, `{"id":"b"}`, binary)
	ds := mustClaim(t, q, "worker-1", 10, never, short)
	if got, want := payloads(ds), []string{`{"id":"a"}`, `{"id":"b"}`, binary}; fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("claimed %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, d := range ds {
		if d.Attempts != 1 {
			t.Errorf("delivery %s Attempts = %d, want 1", d.ID, d.Attempts)
		}
		if d.ID == "" || seen[d.ID] {
			t.Errorf("delivery id %q empty or repeated", d.ID)
		}
		seen[d.ID] = true
	}
	mustAck(t, q, ds...)
	assertPending(t, q, 0)
	if ds := mustClaim(t, q, "worker-1", 10, never, short); len(ds) != 0 {
		t.Fatalf("claim after ack = %q, want nothing", payloads(ds))
	}
	if err := q.Ack(testCtx(t)); err != nil {
		t.Fatalf("Ack with no ids: %v", err)
	}
}

func testFIFOWithinMax(t *testing.T, q Queue) {
	var want []string
	for i := range 7 {
		want = append(want, fmt.Sprintf("entry-%d", i))
	}
	mustEnqueue(t, q, want...)
	tests := []struct {
		max  int
		want []string
	}{
		{3, want[0:3]},
		{1, want[3:4]},
		{10, want[4:7]},
		{10, nil},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("claim %d max %d", i, tt.max), func(t *testing.T) {
			ds := mustClaim(t, q, "solo", tt.max, never, short)
			if got := payloads(ds); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("claimed %q, want %q", got, tt.want)
			}
			mustAck(t, q, ds...)
		})
	}
}

func testPendingCounts(t *testing.T, q Queue) {
	assertPending(t, q, 0)
	mustEnqueue(t, q, "one", "two", "three")
	assertPending(t, q, 3)
	ds := mustClaim(t, q, "w", 2, never, short)
	if len(ds) != 2 {
		t.Fatalf("claimed %d, want 2", len(ds))
	}
	assertPending(t, q, 3) // claimed but unacknowledged entries are still pending
	mustAck(t, q, ds[0])
	assertPending(t, q, 2)
	mustAck(t, q, ds[1])
	rest := mustClaim(t, q, "w", 5, never, short)
	mustAck(t, q, rest...)
	assertPending(t, q, 0)
}

// testOldest: Oldest dates the first entry not acknowledged, claimed or
// not, by when it was enqueued, and is zero for an empty queue.
func testOldest(t *testing.T, q Queue) {
	ctx := testCtx(t)
	oldest := func() time.Time {
		t.Helper()
		at, err := q.Oldest(ctx)
		if err != nil {
			t.Fatalf("Oldest: %v", err)
		}
		return at
	}
	if at := oldest(); !at.IsZero() {
		t.Fatalf("Oldest of an empty queue = %v, want the zero time", at)
	}
	// Redis dates entries by its clock in milliseconds: a margin of a
	// second either side.
	before := time.Now().Add(-time.Second)
	mustEnqueue(t, q, "one")
	after := time.Now().Add(time.Second)
	first := oldest()
	if first.Before(before) || first.After(after) {
		t.Fatalf("Oldest = %v, want between %v and %v", first, before, after)
	}
	mustEnqueue(t, q, "two")
	ds := mustClaim(t, q, "w", 1, never, short)
	if len(ds) != 1 {
		t.Fatalf("claimed %d, want 1", len(ds))
	}
	if at := oldest(); !at.Equal(first) {
		t.Fatalf("Oldest with the first entry claimed = %v, want %v", at, first)
	}
	mustAck(t, q, ds...)
	if at := oldest(); at.Before(first) {
		t.Fatalf("Oldest after the first entry's ack = %v, before it (%v)", at, first)
	}
	mustAck(t, q, mustClaim(t, q, "w", 5, never, short)...)
	if at := oldest(); !at.IsZero() {
		t.Fatalf("Oldest of a drained queue = %v, want the zero time", at)
	}
}

// claimUntil polls Claim until it returns something or the deadline passes;
// it replaces sleeping for staleAfter to elapse.
func claimUntil(tb testing.TB, q Queue, consumer string, staleAfter time.Duration) []memory.Delivery {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ds := mustClaim(tb, q, consumer, 10, staleAfter, 50*time.Millisecond); len(ds) > 0 {
			return ds
		}
	}
	tb.Fatalf("%s claimed nothing within 10s (staleAfter %v)", consumer, staleAfter)
	return nil
}

// testRedeliverAfterCrash simulates a worker that claims an entry and dies
// before acknowledging it: after staleAfter another consumer gets it, with
// Attempts counting both deliveries.
func testRedeliverAfterCrash(t *testing.T, q Queue) {
	const stale = 150 * time.Millisecond
	mustEnqueue(t, q, "job")
	first := mustClaim(t, q, "crashed", 10, never, short)
	if len(first) != 1 || first[0].Attempts != 1 {
		t.Fatalf("first claim = %+v, want one delivery with Attempts 1", first)
	}
	start := time.Now()
	if ds := mustClaim(t, q, "survivor", 10, never, short); len(ds) != 0 {
		t.Fatalf("entry claimed by another consumer before it went stale: %q", payloads(ds))
	}
	second := claimUntil(t, q, "survivor", stale)
	if elapsed := time.Since(start); elapsed < stale/2 {
		t.Fatalf("entry redelivered after %v, before staleAfter %v", elapsed, stale)
	}
	if len(second) != 1 || string(second[0].Payload) != "job" || second[0].Attempts != 2 || second[0].ID != first[0].ID {
		t.Fatalf("redelivery = %+v, want the same entry %s with Attempts 2", second, first[0].ID)
	}
	assertPending(t, q, 1)
	mustAck(t, q, second...)
	assertPending(t, q, 0)
}

func testAckedNeverReturns(t *testing.T, q Queue) {
	mustEnqueue(t, q, "done", "left")
	ds := mustClaim(t, q, "w1", 1, never, short)
	if len(ds) != 1 || string(ds[0].Payload) != "done" {
		t.Fatalf("claim = %q, want [done]", payloads(ds))
	}
	mustAck(t, q, ds...)
	// "left" is claimed and abandoned; with a tiny staleAfter it keeps coming
	// back, while "done" must never appear again.
	mustClaim(t, q, "w1", 10, never, short)
	for i := range 5 {
		for _, d := range claimUntil(t, q, fmt.Sprintf("w%d", i+2), time.Millisecond) {
			if string(d.Payload) != "left" {
				t.Fatalf("round %d: acknowledged entry redelivered: %q", i, d.Payload)
			}
		}
	}
}

func testClaimBlocks(t *testing.T, q Queue) {
	tests := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
	for _, block := range tests {
		t.Run(block.String(), func(t *testing.T) {
			start := time.Now()
			ds := mustClaim(t, q, "idle", 5, never, block)
			elapsed := time.Since(start)
			if len(ds) != 0 {
				t.Fatalf("claim on an empty queue = %q", payloads(ds))
			}
			if elapsed < block*8/10 || elapsed > block+5*time.Second {
				t.Fatalf("Claim with block %v returned after %v", block, elapsed)
			}
		})
	}
}

func testClaimWakes(t *testing.T, q Queue) {
	const block = 20 * time.Second
	type result struct {
		ds  []memory.Delivery
		err error
	}
	done := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		ds, err := q.Claim(testCtx(t), "waiter", 5, never, block)
		done <- result{ds, err}
	}()
	<-started
	start := time.Now()
	mustEnqueue(t, q, "wake up")
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Claim: %v", r.err)
		}
		if !bytes.Equal(firstPayload(r.ds), []byte("wake up")) {
			t.Fatalf("woken claim = %q, want [wake up]", payloads(r.ds))
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("blocked claim woke %v after the enqueue", elapsed)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("blocked claim did not return within 10s of an enqueue (block %v)", block)
	}
}

// firstPayload is the payload of the first delivery, or nil.
func firstPayload(ds []memory.Delivery) []byte {
	if len(ds) == 0 {
		return nil
	}
	return ds[0].Payload
}

// testPurge: a purge deletes the matching entries wherever they are —
// waiting, or claimed by a consumer that has not acknowledged them — over
// a queue longer than one page of any reasonable scan; the others stay,
// in order. A purged entry is never delivered again, even once its claim
// goes stale, and its consumer's acknowledgement is a no-op.
func testPurge(t *testing.T, q Queue) {
	var all, keep []string
	for i := range 300 {
		p := fmt.Sprintf("keep-%03d", i)
		if i%3 == 1 {
			p = fmt.Sprintf("drop-%03d", i)
		} else {
			keep = append(keep, p)
		}
		all = append(all, p)
	}
	batch := make([][]byte, len(all))
	for i, p := range all {
		batch[i] = []byte(p)
	}
	if err := q.EnqueueBatch(testCtx(t), batch); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	claimed := mustClaim(t, q, "inflight", 4, never, short) // keep-000 drop-001 keep-002 keep-003
	calls := 0
	n, err := q.Purge(testCtx(t), func(p []byte) bool { calls++; return bytes.HasPrefix(p, []byte("drop-")) })
	if err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if want := len(all) - len(keep); n != want || calls < len(all) {
		t.Fatalf("Purge deleted %d entries after %d calls of match, want %d of %d", n, calls, want, len(all))
	}
	assertPending(t, q, int64(len(keep)))
	mustAck(t, q, claimed[1]) // the purged entry its consumer went on with
	assertPending(t, q, int64(len(keep)))
	mustAck(t, q, claimed[0], claimed[2], claimed[3])
	var got []string
	for {
		ds := mustClaim(t, q, "next", 100, 0, short)
		if len(ds) == 0 {
			break
		}
		got = append(got, payloads(ds)...)
		mustAck(t, q, ds...)
	}
	if want := keep[3:]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claimed after the purge %q, want %q", got, want)
	}
	if n, err := q.Purge(testCtx(t), func([]byte) bool { return true }); err != nil || n != 0 {
		t.Fatalf("Purge of a drained queue = %d, %v", n, err)
	}
}
