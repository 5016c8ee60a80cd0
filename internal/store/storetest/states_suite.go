package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// StateStore is a store that records whose each provider state is
// (memory.StateBinding), and erases a user's with the user.
type StateStore interface {
	// BindState binds b.States to b.Tenant's b.User until b.Expires; a
	// state bound already keeps its owner. It refuses, with
	// memory.ErrErased, a binding whose user was erased at or after b.At,
	// and removes bindings lapsed by b.At.
	BindState(ctx context.Context, b memory.StateBinding) error
	// BoundStates reports, for each of sts, whether it is bound to
	// tenant's user and has not lapsed by now.
	BoundStates(ctx context.Context, tenant, user string, sts []memory.ProviderState, now time.Time) ([]bool, error)
	DeleteUser(ctx context.Context, tenant, user string) error
}

// RunStates runs the provider state suite. open must return a fresh store
// and register its cleanup.
func RunStates(t *testing.T, open func(t *testing.T) StateStore) {
	t.Helper()
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, s StateStore)
	}{
		{"OwnerOnly", testStateOwnerOnly},
		{"SeveralAtOnce", testStateSeveral},
		{"RepeatedAndBoundInOne", testStateBatch},
		{"ConcurrentInAnyOrder", testStateConcurrent},
		{"ManyLookedUpAtOnce", testStateMany},
		{"FirstOwnerKeepsIt", testStateFirstOwner},
		{"Lapses", testStateLapses},
		{"LapsedRowsRemoved", testStateLapsedRemoved},
		{"ErasureRemoves", testStateErasure},
		{"ErasedUserRefused", testStateErasedRefused},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

var (
	respA = memory.ProviderState{Kind: memory.StateResponse, ID: "resp_a"}
	respB = memory.ProviderState{Kind: memory.StateResponse, ID: "resp_b"}
)

// mustBind binds sts to tenant's user, from at for ttl.
func mustBind(t *testing.T, s StateStore, tenant, user string, st memory.ProviderState, at time.Time, ttl time.Duration, more ...memory.ProviderState) {
	t.Helper()
	sts := append([]memory.ProviderState{st}, more...)
	if err := s.BindState(testCtx(t), memory.StateBinding{Tenant: tenant, User: user, States: sts, At: at, Expires: at.Add(ttl)}); err != nil {
		t.Fatalf("BindState(%s/%s, %v): %v", tenant, user, sts, err)
	}
}

// wantBound checks BoundStates(tenant, user, [st], now).
func wantBound(t *testing.T, s StateStore, tenant, user string, st memory.ProviderState, now time.Time, want bool) {
	t.Helper()
	got, err := s.BoundStates(testCtx(t), tenant, user, []memory.ProviderState{st}, now)
	if err != nil {
		t.Fatalf("BoundStates(%s/%s, %v): %v", tenant, user, st, err)
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("BoundStates(%s/%s, %v) at %v = %v, want [%v]", tenant, user, st, now.Format(time.RFC3339), got, want)
	}
}

// testStateOwnerOnly: a bound state is its owner's alone — not another
// user's of the tenant, not the same user id's of another tenant, not a
// state of another kind with the same id; an id never bound is nobody's.
func testStateOwnerOnly(t *testing.T, s StateStore) {
	now := time.Now()
	mustBind(t, s, "acme", "ana", respA, now, time.Hour)
	wantBound(t, s, "acme", "ana", respA, now, true)
	wantBound(t, s, "acme", "bob", respA, now, false)
	wantBound(t, s, "other", "ana", respA, now, false)
	wantBound(t, s, "acme", "", respA, now, false)
	wantBound(t, s, "acme", "ana", memory.ProviderState{Kind: memory.StateConversation, ID: respA.ID}, now, false)
	wantBound(t, s, "acme", "ana", respB, now, false)
	// A user "" (a request naming no memory user) owns its own.
	mustBind(t, s, "acme", "", respB, now, time.Hour)
	wantBound(t, s, "acme", "", respB, now, true)
	wantBound(t, s, "acme", "ana", respB, now, false)
}

// testStateSeveral: one binding binds every state it names — a
// response and its items — to the owner alone.
func testStateSeveral(t *testing.T, s StateStore) {
	now := time.Now()
	item := memory.ProviderState{Kind: memory.StateItem, ID: "msg_a"}
	mustBind(t, s, "acme", "ana", respA, now, time.Hour, item)
	for _, st := range []memory.ProviderState{respA, item} {
		wantBound(t, s, "acme", "ana", st, now, true)
		wantBound(t, s, "acme", "bob", st, now, false)
	}
}

// testStateBatch: one binding naming a state twice, or states bound
// already — its owner's own and another's — binds each once: the others'
// stay theirs, the rest are the owner's.
func testStateBatch(t *testing.T, s StateStore) {
	now := time.Now()
	item := memory.ProviderState{Kind: memory.StateItem, ID: "msg_a"}
	mustBind(t, s, "acme", "ana", respA, now, time.Hour, item, item)
	mustBind(t, s, "acme", "bob", respB, now, time.Hour, respA, item, respB, respA)
	mustBind(t, s, "acme", "ana", item, now, 2*time.Hour, respA, item)
	for _, st := range []memory.ProviderState{respA, item} {
		wantBound(t, s, "acme", "ana", st, now.Add(90*time.Minute), true)
		wantBound(t, s, "acme", "bob", st, now, false)
	}
	wantBound(t, s, "acme", "bob", respB, now, true)
	wantBound(t, s, "acme", "ana", respB, now, false)
}

// testStateConcurrent: bindings of the same states made at once, in
// opposite orders (a conversation's items listed oldest first and newest
// first, by two requests), by their owner and by another user, all
// succeed: none is aborted as a deadlock of row locks taken in opposite
// orders. The owner's states stay the owner's.
func testStateConcurrent(t *testing.T, s StateStore) {
	now := time.Now()
	sts := make([]memory.ProviderState, 48)
	for i := range sts {
		sts[i] = memory.ProviderState{Kind: memory.StateItem, ID: fmt.Sprintf("msg_c%d", i)}
	}
	mustBind(t, s, "acme", "ana", sts[0], now, time.Hour, sts[1:]...)
	const workers, rounds = 6, 15
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			order := slices.Clone(sts)
			if w%2 == 1 {
				slices.Reverse(order)
			}
			user := "ana"
			if w%3 == 2 {
				user = "bob"
			}
			for range rounds {
				errs <- s.BindState(testCtx(t), memory.StateBinding{Tenant: "acme", User: user, States: order, At: now, Expires: time.Now().Add(time.Hour)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a binding made at once with others failed: %v", err)
		}
	}
	got, err := s.BoundStates(testCtx(t), "acme", "ana", sts, now)
	if err != nil || slices.Contains(got, false) {
		t.Errorf("ana's states after the concurrent bindings: %v, %v; want all hers", got, err)
	}
}

// testStateMany: a lookup of many states, some repeated, some another
// owner's, some never bound, answers each in its place.
func testStateMany(t *testing.T, s StateStore) {
	now := time.Now()
	var mine, theirs, sts []memory.ProviderState
	var want []bool
	for i := range 1000 { // over a store's chunk of states, bound and looked up
		st := memory.ProviderState{Kind: memory.StateItem, ID: fmt.Sprintf("msg_%d", i)}
		switch i % 3 {
		case 0:
			mine = append(mine, st)
		case 1:
			theirs = append(theirs, st)
		}
		sts = append(sts, st)
		want = append(want, i%3 == 0)
	}
	mustBind(t, s, "acme", "ana", mine[0], now, time.Hour, mine[1:]...)
	mustBind(t, s, "acme", "bob", theirs[0], now, time.Hour, theirs[1:]...)
	sts, want = append(sts, sts[0], sts[1]), append(want, true, false)
	got, err := s.BoundStates(testCtx(t), "acme", "ana", sts, now)
	if err != nil {
		t.Fatalf("BoundStates: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("BoundStates of %d states = %v, want %v", len(sts), got, want)
	}
	if got, err := s.BoundStates(testCtx(t), "acme", "ana", nil, now); err != nil || len(got) != 0 {
		t.Errorf("BoundStates of none = %v, %v", got, err)
	}
}

// testStateFirstOwner: binding a state bound to another owner leaves it
// with the first; the owner binding it again keeps it.
func testStateFirstOwner(t *testing.T, s StateStore) {
	now := time.Now()
	mustBind(t, s, "acme", "ana", respA, now, time.Hour)
	mustBind(t, s, "acme", "bob", respA, now, time.Hour)
	mustBind(t, s, "acme", "ana", respA, now, 2*time.Hour)
	wantBound(t, s, "acme", "ana", respA, now.Add(90*time.Minute), true)
	wantBound(t, s, "acme", "bob", respA, now, false)
}

// testStateLapses: a binding reads as unknown from its expiry on.
func testStateLapses(t *testing.T, s StateStore) {
	now := time.Now()
	mustBind(t, s, "acme", "ana", respA, now, time.Hour)
	wantBound(t, s, "acme", "ana", respA, now.Add(59*time.Minute), true)
	wantBound(t, s, "acme", "ana", respA, now.Add(time.Hour), false)
}

// testStateLapsedRemoved: a binding made after another lapsed removes the
// lapsed row — asked about at a time it was still live, it is gone.
func testStateLapsedRemoved(t *testing.T, s StateStore) {
	now := time.Now()
	mustBind(t, s, "acme", "ana", respA, now, time.Hour)
	mustBind(t, s, "acme", "bob", respB, now.Add(2*time.Hour), time.Hour)
	wantBound(t, s, "acme", "ana", respA, now, false)
	wantBound(t, s, "acme", "bob", respB, now.Add(2*time.Hour), true)
}

// testStateErasure: erasing a user removes the user's bindings, and only
// theirs.
func testStateErasure(t *testing.T, s StateStore) {
	now := time.Now()
	mustBind(t, s, "acme", "ana", respA, now, time.Hour)
	mustBind(t, s, "acme", "bob", respB, now, time.Hour)
	if err := s.DeleteUser(testCtx(t), "acme", "ana"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	wantBound(t, s, "acme", "ana", respA, now, false)
	wantBound(t, s, "acme", "bob", respB, now, true)
}

// testStateErasedRefused: a binding from a request that arrived before the
// user's erasure is refused (memory.ErrErased) and not recorded; one from
// a request after it is.
func testStateErasedRefused(t *testing.T, s StateStore) {
	before := time.Now()
	if err := s.DeleteUser(testCtx(t), "acme", "ana"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	err := s.BindState(testCtx(t), memory.StateBinding{Tenant: "acme", User: "ana", States: []memory.ProviderState{respA}, At: before, Expires: before.Add(time.Hour)})
	if !errors.Is(err, memory.ErrErased) {
		t.Fatalf("BindState from before the erasure = %v, want memory.ErrErased", err)
	}
	wantBound(t, s, "acme", "ana", respA, before, false)
	after := time.Now().Add(time.Millisecond)
	mustBind(t, s, "acme", "ana", respB, after, time.Hour)
	wantBound(t, s, "acme", "ana", respB, after, true)
}

// BenchStates measures what the provider state binding adds to a
// Responses request under a shared key: binding a response and two items,
// binding sixteen items, and looking up three states, on s.
func BenchStates(b *testing.B, s StateStore) {
	ctx := context.Background()
	now := time.Now()
	sts := func(i int) []memory.ProviderState {
		return []memory.ProviderState{{Kind: memory.StateResponse, ID: fmt.Sprintf("resp_%d", i)},
			{Kind: memory.StateItem, ID: fmt.Sprintf("msg_%d", i)}, {Kind: memory.StateItem, ID: fmt.Sprintf("rs_%d", i)}}
	}
	b.Run("Bind", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := s.BindState(ctx, memory.StateBinding{Tenant: "acme", User: "ana", States: sts(i), At: now, Expires: now.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A turn of many output items (tool calls, reasoning), or a list of
	// a conversation's items.
	many := func(i int) []memory.ProviderState {
		out := make([]memory.ProviderState, 16)
		for j := range out {
			out[j] = memory.ProviderState{Kind: memory.StateItem, ID: fmt.Sprintf("item_%d_%d", i, j)}
		}
		return out
	}
	b.Run("Bind16", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := s.BindState(ctx, memory.StateBinding{Tenant: "acme", User: "ana", States: many(i), At: now, Expires: now.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Lookup", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := s.BoundStates(ctx, "acme", "ana", sts(i%1000), now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
