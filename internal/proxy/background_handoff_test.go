package proxy

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// hangingHeld is a fakeHeld whose HoldResponse, once hang is set, does
// not answer until its context ends.
type hangingHeld struct {
	*fakeHeld
	hang  atomic.Bool
	calls atomic.Int32
}

func (h *hangingHeld) HoldResponse(ctx context.Context, ex memory.Exchange, id string) (int, error) {
	if h.hang.Load() {
		h.calls.Add(1)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return h.fakeHeld.HoldResponse(ctx, ex, id)
}

// TestBackgroundForgetHandOffBounded: a forget whose hand-off to the
// store hangs returns once handOffTimeout ran out for the hand-off in
// all, the captures not handed off dropped (background_lost).
func TestBackgroundForgetHandOffBounded(t *testing.T) {
	var n atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(bgResponse("resp_"+string(rune('0'+n.Add(1))), "queued")))
	})
	held := &hangingHeld{fakeHeld: newFakeHeld()}
	held.down = true
	g := mustGateway(t, upstreamtest.New(t, mux), nil, Deps{Resolver: identity.New(nil), Capturer: make(chanCapturer, 4), Held: held})
	ana := map[string]string{"X-Memory-User": "ana"}
	for range 3 {
		if resp, b := g.post(t, "/v1/responses", bgRequest, ana); resp.StatusCode != 200 || resp.Header.Get("X-Memory-Degraded") != memory.DegradedBackground {
			t.Fatalf("status %d, degraded %q: %s", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"), b)
		}
	}
	if g.p.pending.empty() {
		t.Fatal("nothing held in the process with the store down")
	}
	held.hang.Store(true)
	forgot := make(chan struct{})
	go func() {
		g.p.Forget(memory.DefaultTenant, "ana")
		close(forgot)
	}()
	select {
	case <-forgot:
	case <-time.After(10 * handOffTimeout):
		t.Fatalf("the forget still waits on a hanging store after %v (%d hand-offs tried)", 10*handOffTimeout, held.calls.Load())
	}
	if !g.p.pending.empty() {
		t.Error("after the forget, captures still held in the process")
	}
	g.waitMetric(t, `memgate_capture_skipped_total{reason="background_lost"} 3`)
}

// TestBackgroundForgetHandOffOfALiveStream: a live background stream held
// at its head in this process (the store was down), handed to the store
// by its user's forget (a conversation deleted), has the store's copy
// deleted when its own stream ends it: nothing lingers in the store.
func TestBackgroundForgetHandOffOfALiveStream(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(bgStreamHead))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(bgStreamTail))
	})
	held := newFakeHeld()
	held.down = true
	captured := make(chanCapturer, 4)
	g := mustGateway(t, upstreamtest.New(t, mux), nil, Deps{Resolver: identity.New(nil), Capturer: captured, Held: held})
	resp, drop := postBGStream(t, g, "ana")
	defer drop()
	if d := resp.Header.Get("X-Memory-Degraded"); d != memory.DegradedBackground {
		t.Fatalf("X-Memory-Degraded %q with the store down", d)
	}
	readUntil(resp, "response.created")
	held.mu.Lock()
	held.down = false
	held.mu.Unlock()
	g.p.Forget(memory.DefaultTenant, "ana")
	if n := held.heldCount(); n != 1 || !g.p.pending.empty() {
		t.Fatalf("after the forget, %d held in the store, in the process %v; want it handed to the store", n, !g.p.pending.empty())
	}
	close(release)
	_, _ = io.Copy(io.Discard, resp.Body)
	g.p.captures.Wait()
	if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." {
		t.Errorf("captured %q", ex.Reply.Content)
	}
	if n := held.heldCount(); n != 0 {
		t.Errorf("the stream captured, the store still holds %d exchanges; want its hand-off deleted", n)
	}
}
