package proxy

import (
	"context"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// unsettledCapturer takes every exchange and reports it not durable (the
// store and the capture queue both hung past record.Options.SaveWait).
type unsettledCapturer chan memory.Exchange

func (c unsettledCapturer) Capture(_ context.Context, ex memory.Exchange) bool {
	c <- ex
	return false
}

// TestMemoryNamesAnswerBeforeItsTurnIsDurable: a whole reply that goes to
// the client before its turn is stored or queued (a crash would lose the
// turn) says so, X-Memory-Degraded: capture; one whose turn is durable
// does not.
func TestMemoryNamesAnswerBeforeItsTurnIsDurable(t *testing.T) {
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	hdr := map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"}
	for _, settled := range []bool{false, true} {
		up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "ok"}))
		captured := make(chan memory.Exchange, 1)
		var capt Capturer = unsettledCapturer(captured)
		want := memory.DegradedCapture
		if settled {
			capt, want = chanCapturer(captured), ""
		}
		g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Capturer: capt})
		resp, b := g.post(t, "/v1/chat/completions", body, hdr)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		wait(t, captured, "capture")
		if got := resp.Header.Get("X-Memory-Degraded"); got != want {
			t.Errorf("settled %v: X-Memory-Degraded %q, want %q", settled, got, want)
		}
	}
}
