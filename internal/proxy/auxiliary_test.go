package proxy

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// gatedPrints is memPrints whose reads answer only once open is closed
// (or fail when their context ends first).
type gatedPrints struct {
	*memPrints
	open <-chan struct{}
}

func (g gatedPrints) Prints(ctx context.Context, user [32]byte) ([][]byte, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.memPrints.Prints(ctx, user)
}

// TestSharedPrintsAreReadBesideTheLoads: a request of the shape of one
// about the chat that this process's prints do not match reads the prints
// the processes share while its memory loads, not before: a store whose
// read answers only once the request's Prepare has started still decides
// (on a serial read it would wait out its timeout). Told by another
// process's prints, the request goes upstream as sent, marked
// X-Memory-Auxiliary and not captured, the memory loaded for it unused;
// not told (the prints are another user's), it is a turn, with its memory,
// captured; when the read fails, it is a turn marked X-Memory-Degraded:
// transcripts, and counted.
func TestSharedPrintsAreReadBesideTheLoads(t *testing.T) {
	said, reply := "My sister Alice lives in Porto since last year.", "That is lovely, Porto is a beautiful city by the river."
	title := `{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":` +
		`"### Task:\nGenerate a concise title.\n<chat_history>\nUSER: ` + said + `\nASSISTANT: ` + reply + `\n</chat_history>"}]}`
	for _, c := range []struct {
		name     string
		author   string // the user whose exchange the shared prints hold
		err      error  // the shared read's
		aux      bool
		degraded string
	}{
		{name: "told", author: "ana", aux: true},
		{name: "another user's prints", author: "bob"},
		{name: "read fails", author: "ana", err: errors.New("redis down"), degraded: memory.DegradedTranscripts},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Another process captured the author's exchange and shared it.
			store := &memPrints{}
			other := newTranscripts(time.Now, store, time.Second)
			k := transcriptKey(memory.DefaultTenant, c.author)
			pp, ok := other.remember(k, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: reply})
			if !ok {
				t.Fatal("the exchange was not kept")
			}
			if err := other.share(context.Background(), k, pp); err != nil {
				t.Fatal(err)
			}
			store.err = c.err

			started := make(chan struct{})
			var once sync.Once
			prepared := make(chan memory.Request, 1)
			loads := preparerFunc(func(ctx context.Context, req memory.Request) (memory.Prepared, error) {
				once.Do(func() { close(started) })
				return injecting(prepared)(ctx, req)
			})
			captured := make(chanCapturer, 1)
			up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "Porto"}))
			g := mustGateway(t, up, func(cfg *gatewayConfig) {
				cfg.SkipTranscripts = true
				// A read made before the loads waits this long, then
				// fails: long enough that it cannot pass for one made
				// beside them on a busy machine.
				cfg.PrintsTimeout = 5 * time.Second
			}, Deps{Resolver: identity.New(nil), Preparer: loads, Capturer: captured, Prints: gatedPrints{store, started}})

			resp, b := g.post(t, "/v1/chat/completions", title, map[string]string{"X-Memory-User": "ana"})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if got := resp.Header.Get("X-Memory-Auxiliary") == "transcript"; got != c.aux {
				t.Fatalf("X-Memory-Auxiliary %q, want it %v", resp.Header.Get("X-Memory-Auxiliary"), c.aux)
			}
			if got := resp.Header.Get("X-Memory-Degraded"); got != c.degraded {
				t.Errorf("X-Memory-Degraded %q, want %q", got, c.degraded)
			}
			sent := up.Requests()[0].Body
			if c.aux {
				if !jsonEqual(t, sent, []byte(title)) {
					t.Errorf("went upstream as %s, want as sent", sent)
				}
				if len(captured) != 0 || resp.Header.Get("X-Memory-Conversation") != "" || resp.Header.Get("X-Memory-Tokens-Sent") != "" {
					t.Errorf("captured %d, conversation %q, tokens sent %q: want none", len(captured),
						resp.Header.Get("X-Memory-Conversation"), resp.Header.Get("X-Memory-Tokens-Sent"))
				}
				g.waitMetric(t, `memgate_auxiliary_requests_total{api="chat"} 1`)
				return
			}
			if !bytes.Contains(sent, []byte("the user likes tea")) {
				t.Errorf("went upstream as %s, want with its memory", sent)
			}
			wait(t, prepared, "the turn's Prepare")
			wait(t, captured, "the turn's capture")
			if c.err != nil {
				g.waitMetric(t, `memgate_auxiliary_prints_failed_total{op="read"} 1`)
			}
		})
	}
}

// TestSharedPrintsTellARequestRefusedAsATurn: a request about the chat
// that only the shared prints tell, and whose message gives a key twice
// (which a turn that may be stored is refused for), goes upstream as
// sent: the check's answer is taken before the refusal.
func TestSharedPrintsTellARequestRefusedAsATurn(t *testing.T) {
	said, reply := "My sister Alice lives in Porto since last year.", "That is lovely, Porto is a beautiful city by the river."
	title := `{"model":"gpt-4o","messages":[{"role":"user","role":"user","content":` +
		`"### Task:\nGenerate a concise title.\n<chat_history>\nUSER: ` + said + `\nASSISTANT: ` + reply + `\n</chat_history>"}]}`
	for _, c := range []struct {
		name   string
		author string
		status int
	}{
		{name: "told", author: "ana", status: 200},
		{name: "not told", author: "bob", status: 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &memPrints{}
			other := newTranscripts(time.Now, store, time.Second)
			k := transcriptKey(memory.DefaultTenant, c.author)
			pp, _ := other.remember(k, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: reply})
			if err := other.share(context.Background(), k, pp); err != nil {
				t.Fatal(err)
			}
			prepared := make(chan memory.Request, 1)
			captured := make(chanCapturer, 1)
			up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "Porto"}))
			g := mustGateway(t, up, func(cfg *gatewayConfig) { cfg.SkipTranscripts = true },
				Deps{Resolver: identity.New(nil), Preparer: injecting(prepared), Capturer: captured, Prints: store})
			resp, b := g.post(t, "/v1/chat/completions", title, map[string]string{"X-Memory-User": "ana"})
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if c.status != 200 {
				return
			}
			if resp.Header.Get("X-Memory-Auxiliary") != "transcript" {
				t.Errorf("X-Memory-Auxiliary %q, want transcript", resp.Header.Get("X-Memory-Auxiliary"))
			}
			if sent := up.Requests()[0].Body; !bytes.Equal(sent, []byte(title)) {
				t.Errorf("went upstream as %s, want as sent", sent)
			}
			if len(prepared)+len(captured) != 0 {
				t.Errorf("prepared %d, captured %d: want none", len(prepared), len(captured))
			}
		})
	}
}
