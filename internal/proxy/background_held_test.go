package proxy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
)

// fakeHeld is a store of held background exchanges that gateways share
// (HeldResponses); down makes every call fail. A claim leases an
// exchange (leased) until the test lapses the lease (lapse) or it is
// settled.
type fakeHeld struct {
	mu     sync.Mutex
	down   bool
	m      map[pendingKey]memory.Exchange
	leased map[pendingKey]bool
}

func newFakeHeld() *fakeHeld {
	return &fakeHeld{m: map[pendingKey]memory.Exchange{}, leased: map[pendingKey]bool{}}
}

// lapse lapses every claim's lease.
func (f *fakeHeld) lapse() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.leased)
}

func (f *fakeHeld) SettleResponse(_ context.Context, tenant, id string, owner []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errHeldDown
	}
	k := pendingKey{tenant, id}
	if ex, ok := f.m[k]; ok && bytes.Equal(owner, memory.UserTombstone(tenant, ex.User)) {
		delete(f.m, k)
		delete(f.leased, k)
	}
	return nil
}

var errHeldDown = errors.New("held store down")

func (f *fakeHeld) HoldResponse(_ context.Context, ex memory.Exchange, id string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, errHeldDown
	}
	f.m[pendingKey{ex.Tenant, id}] = ex
	delete(f.leased, pendingKey{ex.Tenant, id})
	return 0, nil
}

func (f *fakeHeld) HeldResponse(_ context.Context, tenant, user, id string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errHeldDown
	}
	ex, ok := f.m[pendingKey{tenant, id}]
	if !ok || user != "" && ex.User != user {
		return nil, memory.ErrNotFound
	}
	return memory.UserTombstone(tenant, ex.User), nil
}

func (f *fakeHeld) ClaimResponse(_ context.Context, tenant, id string, owner []byte) (memory.Exchange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return memory.Exchange{}, errHeldDown
	}
	k := pendingKey{tenant, id}
	ex, ok := f.m[k]
	if !ok || f.leased[k] || !bytes.Equal(owner, memory.UserTombstone(tenant, ex.User)) {
		return memory.Exchange{}, memory.ErrNotFound
	}
	f.leased[k] = true
	return ex, nil
}

// TestBackgroundResponseHeldInTheSharedStore: with a store the gateways
// share, a background exchange POSTed on one gateway is stored by a GET
// on another, once, with its answer; a GET by another user of the
// tenant stores nothing; nothing is held in either process.
func TestBackgroundResponseHeldInTheSharedStore(t *testing.T) {
	up := newBGUpstream(t)
	held := newFakeHeld()
	captured := make(chanCapturer, 4)
	deps := Deps{Resolver: identity.New(nil), Capturer: captured, Held: held}
	a, b := mustGateway(t, up.Server, nil, deps), mustGateway(t, up.Server, nil, deps)
	ana := map[string]string{"X-Memory-User": "ana"}
	resp, body := a.post(t, "/v1/responses", bgRequest, ana)
	if resp.StatusCode != 200 || resp.Header.Get("X-Memory-Degraded") != "" {
		t.Fatalf("status %d, degraded %q: %s", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"), body)
	}
	if !a.p.pending.empty() || len(held.m) != 1 {
		t.Fatalf("held in the process %v, in the store %d; want the store's alone", !a.p.pending.empty(), len(held.m))
	}
	up.set("completed")
	b.get(t, "/v1/responses/resp_bg", map[string]string{"X-Memory-User": "bob"})
	noCapture(t, b, captured)
	if resp, body := b.get(t, "/v1/responses/resp_bg", ana); resp.StatusCode != 200 || !strings.Contains(string(body), "Porto is in Portugal.") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.User != "ana" || len(ex.Turn) != 1 {
		t.Errorf("captured %q for %+v, turn %+v", ex.Reply.Content, ex.Identity, ex.Turn)
	}
	a.get(t, "/v1/responses/resp_bg", ana)
	noCapture(t, a, captured)
	noCapture(t, b, captured)
}

// TestBackgroundResponseHeldInProcessWhileTheStoreIsDown: a store that
// does not take the exchange leaves it held in the process that
// forwarded it, which says so (X-Memory-Degraded: background), and whose
// GET stores it when the response is done.
func TestBackgroundResponseHeldInProcessWhileTheStoreIsDown(t *testing.T) {
	up := newBGUpstream(t)
	held := newFakeHeld()
	held.down = true
	captured := make(chanCapturer, 4)
	g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: held})
	ana := map[string]string{"X-Memory-User": "ana"}
	resp, body := g.post(t, "/v1/responses", bgRequest, ana)
	if resp.StatusCode != 200 || resp.Header.Get("X-Memory-Degraded") != memory.DegradedBackground {
		t.Fatalf("status %d, degraded %q: %s", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"), body)
	}
	if g.p.pending.empty() {
		t.Fatal("nothing held in the process")
	}
	up.set("completed")
	g.get(t, "/v1/responses/resp_bg", ana)
	if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.User != "ana" {
		t.Errorf("captured %q for %+v", ex.Reply.Content, ex.Identity)
	}
}

// TestBackgroundResponseCompletedByAGETNamingNoUser: a background
// request whose user is named in its body only (Responses' user) is
// stored for that user by a GET naming no user — which a client's GET
// of a response cannot (it has no body) —, held in the process or in the
// shared store; a GET naming another user stores nothing.
func TestBackgroundResponseCompletedByAGETNamingNoUser(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "process", true: "shared"}[shared], func(t *testing.T) {
			up := newBGUpstream(t)
			captured := make(chanCapturer, 4)
			deps := Deps{Resolver: identity.New(nil), Capturer: captured}
			if shared {
				deps.Held = newFakeHeld()
			}
			g := mustGateway(t, up.Server, nil, deps)
			if resp, b := g.post(t, "/v1/responses", `{"model":"o3","input":"Where is Porto?","background":true,"user":"ana"}`, nil); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			up.set("completed")
			g.get(t, "/v1/responses/resp_bg", map[string]string{"X-Memory-User": "bob"})
			noCapture(t, g, captured)
			if resp, b := g.get(t, "/v1/responses/resp_bg", nil); resp.StatusCode != 200 || !strings.Contains(string(b), "Porto is in Portugal.") {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.User != "ana" {
				t.Errorf("captured %q for %+v", ex.Reply.Content, ex.Identity)
			}
			g.get(t, "/v1/responses/resp_bg", nil)
			noCapture(t, g, captured)
		})
	}
}

// ambiguousHeld commits a hold but reports a timeout: a commit whose
// answer ran past the store's timeout.
type ambiguousHeld struct{ *fakeHeld }

func (a ambiguousHeld) HoldResponse(ctx context.Context, ex memory.Exchange, id string) (int, error) {
	_, _ = a.fakeHeld.HoldResponse(ctx, ex, id)
	return 0, context.DeadlineExceeded
}

// TestBackgroundHeldAmbiguouslyStoredOnce: a hold that committed though
// the store reported a timeout is held in the process too; a GET that
// claims the store's copy settles the process's as well, so a second GET
// stores nothing.
func TestBackgroundHeldAmbiguouslyStoredOnce(t *testing.T) {
	up := newBGUpstream(t)
	held := newFakeHeld()
	captured := make(chanCapturer, 4)
	g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: ambiguousHeld{held}})
	ana := map[string]string{"X-Memory-User": "ana"}
	g.post(t, "/v1/responses", bgRequest, ana)
	up.set("completed")
	g.get(t, "/v1/responses/resp_bg", ana)
	bgCaptured(t, captured)
	g.get(t, "/v1/responses/resp_bg", ana)
	noCapture(t, g, captured)
}

// TestBackgroundHeldCopiesShareTheExchangeID: the store's copy of an
// ambiguously held exchange, claimed on another gateway, and the POST's
// gateway's own copy are captured with one exchange id (the store finds
// the second stored, as a redelivery), its request's id in RequestID.
func TestBackgroundHeldCopiesShareTheExchangeID(t *testing.T) {
	up := newBGUpstream(t)
	held := newFakeHeld()
	captured := make(chanCapturer, 4)
	deps := Deps{Resolver: identity.New(nil), Capturer: captured, Held: ambiguousHeld{held}}
	a, b := mustGateway(t, up.Server, nil, deps), mustGateway(t, up.Server, nil, deps)
	ana := map[string]string{"X-Memory-User": "ana"}
	a.post(t, "/v1/responses", bgRequest, ana)
	up.set("completed")
	b.get(t, "/v1/responses/resp_bg", ana)
	first := bgCaptured(t, captured)
	a.get(t, "/v1/responses/resp_bg", ana)
	second := bgCaptured(t, captured)
	if !memory.IsExchangeID(first.ID) || first.ID != second.ID {
		t.Errorf("copies captured as exchanges %q and %q, want one minted id", first.ID, second.ID)
	}
	if first.RequestID == "" || first.RequestID != second.RequestID || first.RequestID == first.ID {
		t.Errorf("request ids %q and %q (exchange %q), want the POST's in both", first.RequestID, second.RequestID, first.ID)
	}
}

// TestBackgroundClaimedNotSettledStaysHeld: a claimed exchange whose
// capture did not settle stays in the store (a crash now does not lose
// it), not claimable under the claim's lease; once the lease lapsed the
// next GET claims it again and captures it under the same exchange id.
func TestBackgroundClaimedNotSettledStaysHeld(t *testing.T) {
	up := newBGUpstream(t)
	held := newFakeHeld()
	captured := make(unsettledCapturer, 4)
	g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: held})
	ana := map[string]string{"X-Memory-User": "ana"}
	g.post(t, "/v1/responses", bgRequest, ana)
	up.set("completed")
	g.get(t, "/v1/responses/resp_bg", ana)
	first := <-captured
	held.mu.Lock()
	n := len(held.m)
	held.mu.Unlock()
	if n != 1 {
		t.Fatalf("claimed exchange whose capture did not settle: %d held in the store, want it still held", n)
	}
	g.get(t, "/v1/responses/resp_bg", ana)
	g.p.captures.Wait()
	select {
	case ex := <-captured:
		t.Fatalf("captured %+v under another claim's lease, want nothing", ex)
	default:
	}
	held.lapse()
	g.get(t, "/v1/responses/resp_bg", ana)
	select {
	case again := <-captured:
		if again.ID != first.ID {
			t.Errorf("claimed again as exchange %q, first %q; want the same id", again.ID, first.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not claimed again after the lease lapsed")
	}
}
