package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// heldCount is how many exchanges f holds.
func (f *fakeHeld) heldCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// TestBackgroundStreamHeldBeforeItsFirstEvent: a background stream's
// exchange is held in the shared store before the client gets its first
// event (which names the response), so a client whose stream broke and
// that resumes at once (GET stream=true) has its turn stored, once.
func TestBackgroundStreamHeldBeforeItsFirstEvent(t *testing.T) {
	held := newFakeHeld()
	captured := make(chanCapturer, 4)
	g := mustGateway(t, bgStreamUpstream(t, true), nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: held})
	ana := map[string]string{"X-Memory-User": "ana"}
	resp, drop := postBGStream(t, g, "ana")
	if d := resp.Header.Get("X-Memory-Degraded"); d != "" {
		t.Errorf("X-Memory-Degraded %q with the store up", d)
	}
	readUntil(resp, "response.created")
	if n := held.heldCount(); n != 1 {
		t.Fatalf("the client has the response's first event, and the store holds %d exchanges; want its own", n)
	}
	drop()
	if resp, b := g.get(t, "/v1/responses/resp_bg?stream=true&starting_after=3", ana); resp.StatusCode != 200 || !strings.Contains(string(b), "response.completed") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.Turn[0].Content != "Where is Porto?" {
		t.Errorf("captured %q, turn %+v", ex.Reply.Content, ex.Turn)
	}
	g.get(t, "/v1/responses/resp_bg", ana)
	noCapture(t, g, captured)
	if n := held.heldCount(); n != 0 || !g.p.pending.empty() {
		t.Errorf("once stored, %d held in the store, in the process %v; want none", n, !g.p.pending.empty())
	}
}

// refusingHeld is a fakeHeld that refuses, as the store does, the
// exchanges of a deleted conversation (memory.ErrHeldDeleted) and of an
// erased user (memory.ErrErased).
type refusingHeld struct {
	*fakeHeld
	deleted, erased string
}

func (r *refusingHeld) HoldResponse(ctx context.Context, ex memory.Exchange, id string) (int, error) {
	r.mu.Lock()
	deleted, erased := r.deleted, r.erased
	r.mu.Unlock()
	switch {
	case ex.Conversation != "" && ex.Conversation == deleted:
		return 0, memory.ErrHeldDeleted
	case ex.User == erased:
		return 0, memory.ErrErased
	}
	return r.fakeHeld.HoldResponse(ctx, ex, id)
}

// TestBackgroundForgetInProcessKeepsOtherConversations: exchanges held in
// the process (the store was down) outlive the deletion of another of
// their user's conversations — the forget hands them to the store, which
// refuses the deleted conversation's alone — and are stored when their
// GET returns them done; the user's erasure forgets them all.
func TestBackgroundForgetInProcessKeepsOtherConversations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		erase     bool
		stored    []string // the response ids stored, of resp_1 (c1) and resp_2 (c2)
		storeDown bool     // the store down at the forget too: nothing can tell, both forgotten
	}{
		{name: "conversation deleted", stored: []string{"resp_2"}},
		{name: "user erased", erase: true},
		{name: "store down", storeDown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(bgResponse("resp_"+string(rune('0'+n.Add(1))), "queued")))
			})
			mux.HandleFunc("GET /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(bgResponse(r.PathValue("id"), "completed")))
			})
			held := &refusingHeld{fakeHeld: newFakeHeld()}
			held.down = true
			captured := make(chanCapturer, 4)
			g := mustGateway(t, upstreamtest.New(t, mux), nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: held})
			for _, c := range []string{"c1", "c2"} {
				resp, b := g.post(t, "/v1/responses", bgRequest, map[string]string{"X-Memory-User": "ana", "X-Memory-Conversation": c})
				if resp.StatusCode != 200 || resp.Header.Get("X-Memory-Degraded") != memory.DegradedBackground {
					t.Fatalf("status %d, degraded %q: %s", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"), b)
				}
			}
			held.mu.Lock()
			held.down = tc.storeDown
			if tc.erase {
				held.erased = "ana"
			} else {
				held.deleted = "c1"
			}
			held.mu.Unlock()
			g.p.Forget(memory.DefaultTenant, "ana")
			held.mu.Lock()
			held.down = false
			held.mu.Unlock()
			ana := map[string]string{"X-Memory-User": "ana"}
			var got []string
			for _, id := range []string{"resp_1", "resp_2"} {
				if resp, b := g.get(t, "/v1/responses/"+id, ana); resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				g.p.captures.Wait()
				select {
				case ex := <-captured:
					got = append(got, id)
					if ex.Conversation != "c"+id[len(id)-1:] {
						t.Errorf("%s captured for conversation %q", id, ex.Conversation)
					}
				default:
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.stored, ",") {
				t.Errorf("stored %v after the forget, want %v", got, tc.stored)
			}
		})
	}
}

// tooLargeHeld refuses every exchange as too large to hold.
type tooLargeHeld struct{ *fakeHeld }

func (tooLargeHeld) HoldResponse(context.Context, memory.Exchange, string) (int, error) {
	return 0, memory.ErrHeldTooLarge
}

// TestBackgroundTooLargeToHold: an exchange the store refuses as too
// large to hold (memory.HeldExchangeMaxBytes) is counted not captured
// (capture_skipped too_large), and held nowhere, the process neither: it
// gives up no other exchange.
func TestBackgroundTooLargeToHold(t *testing.T) {
	up := newBGUpstream(t)
	captured := make(chanCapturer, 4)
	g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: tooLargeHeld{newFakeHeld()}})
	ana := map[string]string{"X-Memory-User": "ana"}
	if resp, b := g.post(t, "/v1/responses", bgRequest, ana); resp.StatusCode != 200 || resp.Header.Get("X-Memory-Degraded") != "" {
		t.Fatalf("status %d, degraded %q: %s", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"), b)
	}
	g.waitMetric(t, `memgate_capture_skipped_total{reason="too_large"} 1`)
	if !g.p.pending.empty() {
		t.Error("an exchange too large to hold is held in the process")
	}
	up.set("completed")
	g.get(t, "/v1/responses/resp_bg", ana)
	noCapture(t, g, captured)
}
