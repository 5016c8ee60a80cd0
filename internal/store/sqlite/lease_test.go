package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

// Two Stores on one file stand in for two processes (`gateway serve` and
// `gateway worker`, or two gateways) sharing the outbox.

// mustLease takes or renews consumer's lease on ob, checking what it reports.
func mustLease(tb testing.TB, ob *sqlite.Outbox, consumer string, ttl time.Duration, wantHeld, wantTaken bool) {
	tb.Helper()
	held, taken, err := ob.Lease(context.Background(), consumer, ttl)
	if err != nil {
		tb.Fatalf("Lease(%s): %v", consumer, err)
	}
	if held != wantHeld || taken != wantTaken {
		tb.Fatalf("Lease(%s) = held %v, taken %v; want %v, %v", consumer, held, taken, wantHeld, wantTaken)
	}
}

// waitTaken waits until consumer takes the lease (its holder's ran out)
// for ttl.
func waitTaken(tb testing.TB, ob *sqlite.Outbox, consumer string, ttl time.Duration) {
	tb.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		held, taken, err := ob.Lease(context.Background(), consumer, ttl)
		if err != nil {
			tb.Fatalf("Lease(%s): %v", consumer, err)
		}
		if held {
			if !taken {
				tb.Fatalf("Lease(%s) held without being taken", consumer)
			}
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s never took the lease", consumer)
		}
		time.Sleep(time.Millisecond)
	}
}

// claimed returns the payloads consumer claims now.
func claimed(tb testing.TB, ob *sqlite.Outbox, consumer string, staleAfter time.Duration) string {
	tb.Helper()
	ds, err := ob.Claim(context.Background(), consumer, 10, staleAfter, 0)
	if err != nil {
		tb.Fatalf("Claim(%s): %v", consumer, err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Payload))
	}
	return strings.Join(out, " ")
}

// TestOutboxLeaseOneHolderAtATime: across processes, one consumer holds
// the lease at a time; its holder renews it; once it runs out (its holder
// crashed) another takes it, and the first, back, no longer holds it.
func TestOutboxLeaseOneHolderAtATime(t *testing.T) {
	_, path := mustTempStore(t)
	a, b := mustOpen(t, path).Outbox(), mustOpen(t, path).Outbox()
	mustLease(t, a, "a", time.Hour, true, true)
	mustLease(t, a, "a", time.Hour, true, false)
	mustLease(t, b, "b", time.Hour, false, false)
	mustLease(t, b, "a", 10*time.Millisecond, true, false) // a renews, for a short while, through any process
	waitTaken(t, b, "b", time.Hour)
	mustLease(t, a, "a", time.Hour, false, false)
	mustLease(t, b, "b", time.Hour, true, false)

	for _, tc := range []struct {
		consumer string
		ttl      time.Duration
	}{{"", time.Second}, {"a", 0}} {
		if _, _, err := a.Lease(context.Background(), tc.consumer, tc.ttl); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("Lease(%q, %s) = %v, want ErrInvalid", tc.consumer, tc.ttl, err)
		}
	}
}

// TestOutboxClaimFollowsTheLease: once the outbox is leased only the live holder claims, even
// entries nobody claimed; a holder whose lease ran out claims nothing,
// and the one that took it over reclaims at once what the other claimed.
func TestOutboxClaimFollowsTheLease(t *testing.T) {
	_, path := mustTempStore(t)
	a, b := mustOpen(t, path).Outbox(), mustOpen(t, path).Outbox()
	for i := range 4 {
		if err := a.Enqueue(context.Background(), fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A lease that outlasts a busy machine's pause of a second or so
	// before the two claims under it; waitTaken then waits it out.
	mustLease(t, a, "a", 2*time.Second, true, true)
	if got := claimed(t, b, "b", time.Hour); got != "" {
		t.Fatalf("b claimed %q under a's lease", got)
	}
	if got := claimed(t, b, "a", time.Hour); got != "e0 e1 e2 e3" {
		t.Fatalf("a claimed %q, want every entry", got)
	}
	waitTaken(t, b, "b", time.Hour)
	if got := claimed(t, a, "a", time.Millisecond); got != "" {
		t.Fatalf("a claimed %q after losing its lease", got)
	}
	if got := claimed(t, b, "b", time.Hour); got != "e0 e1 e2 e3" {
		t.Fatalf("the new holder claimed %q, want what a left claimed, at once", got)
	}
	if got := claimed(t, b, "b", time.Hour); got != "" {
		t.Fatalf("the holder claimed its own fresh claims again: %q", got)
	}
}

// TestOutboxQueuedCountsTurns: a conversation whose turns were queued by
// one process is reported queued to another until every one of its
// entries is acknowledged, claimed or not; entries queued without a
// conversation count for none.
func TestOutboxQueuedCountsTurns(t *testing.T) {
	_, path := mustTempStore(t)
	a, b := mustOpen(t, path).Outbox(), mustOpen(t, path).Outbox()
	ctx := context.Background()
	for _, conv := range []string{"x", "x", "y"} {
		if err := a.EnqueueTurn(ctx, conv, []byte(conv)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Enqueue(ctx, []byte("z")); err != nil {
		t.Fatal(err)
	}
	queued := func() string {
		got, err := b.Queued(ctx, "x", "y", "z")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got)
	}
	if got := queued(); got != "[true true false]" {
		t.Fatalf("Queued(x, y, z) = %s", got)
	}
	ds, err := b.Claim(ctx, "w", 2, time.Hour, 0)
	if err != nil || len(ds) != 2 {
		t.Fatalf("claimed %d, %v", len(ds), err)
	}
	if got := queued(); got != "[true true false]" {
		t.Fatalf("after a claim Queued(x, y, z) = %s", got)
	}
	if err := b.Ack(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := queued(); got != "[true true false]" {
		t.Fatalf("with one of x's turns left Queued(x, y, z) = %s", got)
	}
	if err := b.Ack(ctx, ds[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := queued(); got != "[false true false]" {
		t.Fatalf("after x's turns Queued(x, y, z) = %s", got)
	}
	if err := a.EnqueueTurn(ctx, "", nil); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("EnqueueTurn without a conversation = %v, want ErrInvalid", err)
	}
}

var _ storetest.Leaser = (*sqlite.Outbox)(nil)

// TestOutboxLeaseContract runs the lease contract over each outbox of one
// file, opened by two Stores as two processes do.
func TestOutboxLeaseContract(t *testing.T) {
	for name, outbox := range map[string]func(*sqlite.Store) *sqlite.Outbox{
		"capture": (*sqlite.Store).Outbox, "enrich": (*sqlite.Store).EnrichOutbox,
	} {
		t.Run(name, func(t *testing.T) {
			storetest.RunLeaser(t, func(t *testing.T) (storetest.Leaser, storetest.Leaser) {
				_, path := mustTempStore(t)
				return outbox(mustOpen(t, path)), outbox(mustOpen(t, path))
			})
		})
	}
}
