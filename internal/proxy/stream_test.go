package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// readEvent reads one SSE event (up to its blank line) from br.
func readEvent(tb testing.TB, br *bufio.Reader) string {
	tb.Helper()
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			tb.Fatalf("read event: %v (got %q)", err, b.String())
		}
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}

func TestStreamRelaysByteForByte(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{})
	reply := upstreamtest.Reply{Content: "Sure. ", ToolCalls: []upstreamtest.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lisbon"}`},
		{ID: "call_2", Name: "get_time", Arguments: `{"tz":"WET"}`},
	}}
	up.SetHandler(upstreamtest.Chat(reply))
	body := `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	resp, got := g.post(t, "/v1/chat/completions", body, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var want strings.Builder
	for _, e := range upstreamtest.StreamEvents("gpt-4o", reply, true) {
		want.WriteString("data: " + e + "\n\n")
	}
	want.WriteString("data: [DONE]\n\n")
	if string(got) != want.String() {
		t.Errorf("stream differs:\n got %q\nwant %q", got, want.String())
	}
	if !strings.Contains(string(got), `"choices":[],"usage":{"prompt_tokens":9`) {
		t.Errorf("usage chunk missing")
	}
}

func TestStreamFirstEventArrivesBeforeUpstreamFinishes(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	g := mustGateway(t, up, nil, Deps{})
	resp := g.streamRequest(t, context.Background(), nil)
	br := bufio.NewReader(resp.Body)
	events := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}
	for _, e := range events {
		feed.Send(t, e)
		// The upstream still holds the rest of the stream: this event can
		// only arrive because the gateway flushed it.
		if got := readEvent(t, br); got != "data: "+e+"\n" {
			t.Fatalf("event %q, want data: %s", got, e)
		}
	}
	feed.End(t)
	if got := readEvent(t, br); got != "data: [DONE]\n" {
		t.Fatalf("last event %q, want [DONE]", got)
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("unexpected trailing bytes %q", rest)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	g := mustGateway(t, up, nil, Deps{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := g.streamRequest(t, ctx, nil)
	br := bufio.NewReader(resp.Body)
	feed.Send(t, `{"n":1}`)
	readEvent(t, br)
	cancel()
	wait(t, feed.Canceled(), "upstream request to be cancelled")
	g.waitMetric(t, `memgate_http_requests_total{route="chat",status="499"} 1`)
}

func TestStreamBrokenMidwayIsAbortedNotRetried(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	g := mustGateway(t, up, nil, Deps{})
	resp := g.streamRequest(t, context.Background(), nil)
	br := bufio.NewReader(resp.Body)
	feed.Send(t, `{"n":1}`)
	readEvent(t, br)
	feed.Break(t)
	rest, err := io.ReadAll(br)
	if err == nil {
		t.Errorf("client read a clean end after the upstream broke (got %q)", rest)
	}
	if strings.Contains(string(rest), "[DONE]") {
		t.Errorf("broken stream was completed: %q", rest)
	}
	if n := up.Calls(); n != 1 {
		t.Errorf("upstream called %d times, want 1 (no retry after the first byte)", n)
	}
	g.waitMetric(t, `memgate_http_requests_total{route="chat",status="502"} 1`)
}

// chatChunk is one chat completion chunk of the reply: delta and
// finish_reason as JSON.
func chatChunk(delta, finish string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":` + finish + `}]}`
}

// relayedStream starts alice's memory-on chat stream through a gateway
// capturing into the returned channel, has the upstream send events and
// reads each back as relayed; cancel hangs the client up.
func relayedStream(t *testing.T, events ...string) (g *gateway, feed *upstreamtest.Feed, captured chanCapturer, cancel context.CancelFunc) {
	t.Helper()
	feed = upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	captured = make(chanCapturer, 1)
	g = mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Capturer: captured})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp := g.streamRequest(t, ctx, map[string]string{"X-Memory-User": "alice"})
	br := bufio.NewReader(resp.Body)
	for _, e := range events {
		feed.Send(t, e)
		if got := readEvent(t, br); got != "data: "+e+"\n" {
			t.Fatalf("event %q, want data: %s", got, e)
		}
	}
	return g, feed, captured, cancel
}

// TestClientHangUpAfterFinishStoresTurn: a client that stops reading a chat
// stream once it has the reply's finish_reason (an SDK loop that breaks on
// it, before the usage chunk or [DONE]) hangs up with the whole reply in
// hand; the turn is stored as it is when the upstream ends the stream
// there. A client that hangs up before the finish_reason (a stop button)
// has no whole reply, and nothing is stored.
func TestClientHangUpAfterFinishStoresTurn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		events []string
		stored bool
	}{
		{"after finish_reason", []string{chatChunk(`{"role":"assistant","content":"You like tea."}`, "null"), chatChunk(`{}`, `"stop"`)}, true},
		{"before finish_reason", []string{chatChunk(`{"role":"assistant","content":"You like"}`, "null")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, feed, captured, cancel := relayedStream(t, tt.events...)
			cancel()
			wait(t, feed.Canceled(), "upstream request to be cancelled")
			g.waitMetric(t, `memgate_http_requests_total{route="chat",status="499"} 1`)
			if !tt.stored {
				g.p.Wait()
				if len(captured) != 0 {
					t.Fatalf("a reply cut off before its finish_reason was captured: %+v", <-captured)
				}
				return
			}
			ex := wait(t, captured, "the exchange to be captured")
			if ex.User != "alice" || len(ex.Turn) != 1 || ex.Turn[0].Content != "hi" || ex.Reply.Content != "You like tea." {
				t.Errorf("exchange: user %q, turn %+v, reply %+v", ex.User, ex.Turn, ex.Reply)
			}
		})
	}
}

// TestNoCaptureStartsAfterDrain: at shutdown the gateway drains the
// proxy's captures once the server stopped; a handler the server gave up
// on that ends its stream later starts no capture (the process's memory
// is closing), and the turn is counted as not captured, shutdown.
func TestNoCaptureStartsAfterDrain(t *testing.T) {
	g, _, captured, cancel := relayedStream(t, chatChunk(`{"role":"assistant","content":"You like tea."}`, `"stop"`))
	g.p.Drain()
	cancel()
	g.waitMetric(t, `memgate_capture_skipped_total{reason="shutdown"} 1`)
	if len(captured) != 0 {
		t.Fatalf("a capture ran after the drain: %+v", <-captured)
	}
}
