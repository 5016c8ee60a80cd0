package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Leaser is a queue's lease, as the write path's worker and the enricher
// take it (record.Leaser): one consumer holds the queue at a time.
type Leaser interface {
	Lease(ctx context.Context, consumer string, ttl time.Duration) (held, taken bool, err error)
	Release(ctx context.Context, consumer string) error
}

// KeyLeases are leases on keys (enrich.ConversationLeases): one holder
// holds each key at a time, each key independently of the others.
type KeyLeases interface {
	Lease(ctx context.Context, holder string, ttl time.Duration, keys ...string) ([]bool, error)
	Release(ctx context.Context, holder string, keys ...string) error
}

// RunLeaser runs the queue lease contract suite. open returns two handles
// on one fresh queue's lease, as two processes sharing it hold them (two
// Stores on one SQLite file, two Redis clients).
func RunLeaser(t *testing.T, open func(t *testing.T) (a, b Leaser)) {
	t.Helper()
	runPairs(t, open, []pairCase[Leaser]{
		{"OneHolderAtATime", testLeaseOneHolder},
		{"RunsOutWithoutRenewal", testLeaseRunsOut},
		{"ReleaseHandsOver", testLeaseRelease},
		{"RefusesNoConsumerOrTTL", testLeaseInvalid},
	})
}

// mustLease takes or renews consumer's lease, checking what it reports.
func mustLease(tb testing.TB, l Leaser, consumer string, ttl time.Duration, wantHeld, wantTaken bool) {
	tb.Helper()
	held, taken, err := l.Lease(testCtx(tb), consumer, ttl)
	if err != nil {
		tb.Fatalf("Lease(%s): %v", consumer, err)
	}
	if held != wantHeld || taken != wantTaken {
		tb.Fatalf("Lease(%s) = held %v, taken %v; want %v, %v", consumer, held, taken, wantHeld, wantTaken)
	}
}

// testLeaseOneHolder: the first consumer takes the lease, renews it
// (held, not taken), and nobody else holds it meanwhile, through either
// handle.
func testLeaseOneHolder(t *testing.T, a, b Leaser) {
	mustLease(t, a, "a", time.Hour, true, true)
	mustLease(t, a, "a", time.Hour, true, false)
	mustLease(t, b, "b", time.Hour, false, false)
	mustLease(t, b, "a", time.Hour, true, false) // its holder renews it through any handle
	mustLease(t, a, "b", time.Hour, false, false)
}

// testLeaseRunsOut: a holder that stops renewing (crashed) loses the
// lease once its ttl passed; the next consumer takes it, and the first no
// longer holds it.
func testLeaseRunsOut(t *testing.T, a, b Leaser) {
	mustLease(t, a, "a", 50*time.Millisecond, true, true)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		held, taken, err := b.Lease(testCtx(t), "b", time.Hour)
		if err != nil {
			t.Fatalf("Lease(b): %v", err)
		}
		if held {
			if !taken {
				t.Fatal("b holds the lease without having taken it")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed holder's lease never ran out")
		}
	}
	mustLease(t, a, "a", time.Hour, false, false)
}

// testLeaseRelease: only the holder's release gives the lease up, and the
// next consumer takes it at once.
func testLeaseRelease(t *testing.T, a, b Leaser) {
	mustLease(t, a, "a", time.Hour, true, true)
	if err := b.Release(testCtx(t), "b"); err != nil {
		t.Fatalf("Release(b): %v", err)
	}
	mustLease(t, b, "b", time.Hour, false, false)
	if err := a.Release(testCtx(t), "a"); err != nil {
		t.Fatalf("Release(a): %v", err)
	}
	mustLease(t, b, "b", time.Hour, true, true)
}

// testLeaseInvalid: a lease needs a consumer and a positive ttl.
func testLeaseInvalid(t *testing.T, a, _ Leaser) {
	for _, tc := range []struct {
		consumer string
		ttl      time.Duration
	}{{"", time.Second}, {"a", 0}, {"a", -time.Second}} {
		if _, _, err := a.Lease(testCtx(t), tc.consumer, tc.ttl); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("Lease(%q, %s) = %v, want ErrInvalid", tc.consumer, tc.ttl, err)
		}
	}
}

// RunKeyLeases runs the key lease contract suite. open returns two
// handles on one fresh set of leases, as two processes hold them.
func RunKeyLeases(t *testing.T, open func(t *testing.T) (a, b KeyLeases)) {
	t.Helper()
	runPairs(t, open, []pairCase[KeyLeases]{
		{"EachKeyOneHolder", testKeysOneHolder},
		{"RunOutWithoutRenewal", testKeysRunOut},
		{"ReleaseOnlyOwn", testKeysRelease},
		{"RefuseNoHolderOrTTL", testKeysInvalid},
	})
}

// mustLeaseKeys takes or renews holder's leases on keys and checks which
// it holds.
func mustLeaseKeys(tb testing.TB, l KeyLeases, holder string, ttl time.Duration, keys []string, want ...bool) {
	tb.Helper()
	held, err := l.Lease(testCtx(tb), holder, ttl, keys...)
	if err != nil {
		tb.Fatalf("Lease(%s, %q): %v", holder, keys, err)
	}
	if !slices.Equal(held, want) {
		tb.Fatalf("Lease(%s, %q) = %v, want %v", holder, keys, held, want)
	}
}

// testKeysOneHolder: each key is held by one holder at a time, renewed by
// it, while other keys are free to others, in one call; no keys, no
// answer.
func testKeysOneHolder(t *testing.T, a, b KeyLeases) {
	mustLeaseKeys(t, a, "a", time.Hour, []string{"k1"}, true)
	mustLeaseKeys(t, a, "a", time.Hour, []string{"k1"}, true)
	mustLeaseKeys(t, b, "b", time.Hour, []string{"k1", "k2"}, false, true)
	mustLeaseKeys(t, a, "a", time.Hour, []string{"k2", "k1", "k3"}, false, true, true)
	mustLeaseKeys(t, b, "a", time.Hour, []string{"k1"}, true) // its holder renews it through any handle
	if held, err := a.Lease(testCtx(t), "a", time.Hour); err != nil || len(held) != 0 {
		t.Fatalf("Lease of no keys = %v, %v", held, err)
	}
}

// testKeysRunOut: a holder that stops renewing (crashed) loses its lease
// once its ttl passed, and another takes it.
func testKeysRunOut(t *testing.T, a, b KeyLeases) {
	mustLeaseKeys(t, a, "a", 50*time.Millisecond, []string{"k"}, true)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		held, err := b.Lease(testCtx(t), "b", time.Hour, "k")
		if err != nil {
			t.Fatalf("Lease(b): %v", err)
		}
		if held[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed holder's lease never ran out")
		}
	}
	mustLeaseKeys(t, a, "a", time.Hour, []string{"k"}, false)
}

// testKeysRelease: a release gives up only the releaser's own leases (a
// holder whose lease ran out and was taken releases nothing of the new
// holder's); the next holder takes a released key at once.
func testKeysRelease(t *testing.T, a, b KeyLeases) {
	mustLeaseKeys(t, a, "a", time.Hour, []string{"k1", "k2"}, true, true)
	if err := b.Release(testCtx(t), "b", "k1", "k2"); err != nil {
		t.Fatalf("Release(b): %v", err)
	}
	mustLeaseKeys(t, b, "b", time.Hour, []string{"k1", "k2"}, false, false)
	if err := a.Release(testCtx(t), "a", "k1"); err != nil {
		t.Fatalf("Release(a): %v", err)
	}
	mustLeaseKeys(t, b, "b", time.Hour, []string{"k1", "k2"}, true, false)
	if err := a.Release(testCtx(t), "a"); err != nil {
		t.Fatalf("Release of no keys: %v", err)
	}
}

// testKeysInvalid: a lease needs a holder and a positive ttl.
func testKeysInvalid(t *testing.T, a, _ KeyLeases) {
	for _, tc := range []struct {
		holder string
		ttl    time.Duration
	}{{"", time.Second}, {"a", 0}} {
		if _, err := a.Lease(testCtx(t), tc.holder, tc.ttl, "k"); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("Lease(%q, %s) = %v, want ErrInvalid", tc.holder, tc.ttl, err)
		}
	}
}
