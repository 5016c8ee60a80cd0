package proxy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
)

// fakeHeld is a store of held background exchanges that gateways share
// (HeldResponses); down makes every call fail.
type fakeHeld struct {
	mu   sync.Mutex
	down bool
	m    map[pendingKey]memory.Exchange
}

func newFakeHeld() *fakeHeld { return &fakeHeld{m: map[pendingKey]memory.Exchange{}} }

var errHeldDown = errors.New("held store down")

func (f *fakeHeld) HoldResponse(_ context.Context, ex memory.Exchange, id string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, errHeldDown
	}
	f.m[pendingKey{ex.Tenant, id}] = ex
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
	if !ok || !bytes.Equal(owner, memory.UserTombstone(tenant, ex.User)) {
		return memory.Exchange{}, memory.ErrNotFound
	}
	delete(f.m, k)
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
