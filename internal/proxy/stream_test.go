package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
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
	raw := make([]string, len(events))
	for i, e := range events {
		raw[i] = "data: " + e + "\n\n"
	}
	return relayedStreamOn(t, "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`, raw...)
}

// relayedStreamOn is relayedStream for a request body to any API's path,
// the events given as the upstream writes them (each up to its blank
// line).
func relayedStreamOn(t *testing.T, path, body string, events ...string) (g *gateway, feed *upstreamtest.Feed, captured chanCapturer, cancel context.CancelFunc) {
	t.Helper()
	return relayedStreamReadOn(t, 0, path, body, events...)
}

// relayedStreamReadOn is relayedStreamOn through a gateway that reads on
// an upstream whose client hung up after a whole answer for readOn
// (Options.HangUpReadOn; 0: the default).
func relayedStreamReadOn(t *testing.T, readOn time.Duration, path, body string, events ...string) (g *gateway, feed *upstreamtest.Feed, captured chanCapturer, cancel context.CancelFunc) {
	t.Helper()
	feed = upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	captured = make(chanCapturer, 1)
	g = mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL(); c.HangUpReadOn = readOn },
		Deps{Resolver: identity.New(nil), Capturer: captured})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Memory-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("stream request: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	for _, e := range events {
		feed.SendRaw(t, e)
		if got := readEvent(t, br) + "\n"; got != e {
			t.Fatalf("event %q, want %q", got, e)
		}
	}
	return g, feed, captured, cancel
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

// sseEvent is one event of a typed event stream (Anthropic's, the
// Responses API's) as an upstream writes it.
func sseEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// TestClientHangUpAfterAnswerStoresTurn: a client that stops reading a
// stream once it has the whole answer, before the terminal event the
// gateway holds back (an SDK loop that breaks on chat's finish_reason,
// before the usage chunk or [DONE]; on Anthropic's message_delta
// stop_reason; on the Responses message's content_part.done or
// output_item.done), hangs up with the whole reply in hand: the turn is
// stored, once, as it is when the upstream ends the stream there. One
// that hangs up before (a stop button), or, on the Responses API, whose
// request offered tools or named a stored prompt (which may carry tools:
// a function call may follow the message until response.completed), has
// nothing stored.
func TestClientHangUpAfterAnswerStoresTurn(t *testing.T) {
	const (
		chatBody      = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		anthropicBody = `{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		responsesBody = `{"model":"gpt-4o","stream":true,"input":"hi"}`
		withTools     = `{"model":"gpt-4o","stream":true,"input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{}}}]}`
		withPrompt    = `{"model":"gpt-4o","stream":true,"input":"hi","prompt":{"id":"pmpt_1"}}`
	)
	anthropic := []string{
		sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-6","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`),
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"You like "}}`),
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tea."}}`),
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
		sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`),
	}
	responses := []string{
		sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`),
		sseEvent("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`),
		sseEvent("response.content_part.added", `{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`),
		sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"You like "}`),
		sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"tea."}`),
		sseEvent("response.output_text.done", `{"type":"response.output_text.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"text":"You like tea."}`),
		sseEvent("response.content_part.done", `{"type":"response.content_part.done","sequence_number":6,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"You like tea.","annotations":[]}}`),
		sseEvent("response.output_item.done", `{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"You like tea.","annotations":[]}]}}`),
	}
	chat := []string{
		"data: " + chatChunk(`{"role":"assistant","content":"You like "}`, "null") + "\n\n",
		"data: " + chatChunk(`{"content":"tea."}`, "null") + "\n\n",
		"data: " + chatChunk(`{}`, `"stop"`) + "\n\n",
	}
	for _, tt := range []struct {
		name, path, body, route string
		events                  []string
		stored                  bool
	}{
		{"chat after finish_reason", "/v1/chat/completions", chatBody, "chat", chat, true},
		{"chat before finish_reason", "/v1/chat/completions", chatBody, "chat", chat[:2], false},
		{"anthropic after stop_reason", "/v1/messages", anthropicBody, "messages", anthropic, true},
		{"anthropic before stop_reason", "/v1/messages", anthropicBody, "messages", anthropic[:5], false},
		{"responses after output_item.done", "/v1/responses", responsesBody, "responses", responses, true},
		{"responses after content_part.done", "/v1/responses", responsesBody, "responses", responses[:7], true},
		{"responses before content_part.done", "/v1/responses", responsesBody, "responses", responses[:6], false},
		{"responses before output_text.done", "/v1/responses", responsesBody, "responses", responses[:5], false},
		{"responses offering tools", "/v1/responses", withTools, "responses", responses, false},
		{"responses naming a stored prompt", "/v1/responses", withPrompt, "responses", responses, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Read on for a moment after the hang-up (TestHangUpReadOnBounded):
			// the upstream sends nothing more.
			g, feed, captured, cancel := relayedStreamReadOn(t, 50*time.Millisecond, tt.path, tt.body, tt.events...)
			cancel()
			wait(t, feed.Canceled(), "upstream request to be cancelled")
			g.waitMetric(t, `memgate_http_requests_total{route="`+tt.route+`",status="499"} 1`)
			if !tt.stored {
				g.p.Wait()
				if len(captured) != 0 {
					t.Fatalf("a reply not known whole was captured: %+v", <-captured)
				}
				return
			}
			ex := wait(t, captured, "the exchange to be captured")
			if ex.User != "alice" || len(ex.Turn) != 1 || ex.Turn[0].Content != "hi" || ex.Reply.Content != "You like tea." {
				t.Errorf("exchange: user %q, turn %+v, reply %+v", ex.User, ex.Turn, ex.Reply)
			}
			g.p.Wait()
			if len(captured) != 0 {
				t.Errorf("the exchange was captured twice: %+v", <-captured)
			}
		})
	}
}

// gatedCapturer hands each exchange on got, holds its capture until
// release, and then reports whether the capture's context was still
// live.
type gatedCapturer struct {
	got     chan memory.Exchange
	release chan struct{}
	ctxErr  chan error
}

func (c gatedCapturer) Capture(ctx context.Context, ex memory.Exchange) bool {
	c.got <- ex
	<-c.release
	c.ctxErr <- ctx.Err()
	return true
}

// TestClientHangUpOnWholeReplyStoresTurn: a whole (non-stream) reply is
// read and handed to the Capturer before any of it is written, on every
// API alike; a client that hangs up then, before or while the body is
// written, has its turn stored all the same, under a context its hang-up
// does not cancel, once.
func TestClientHangUpOnWholeReplyStoresTurn(t *testing.T) {
	for _, tt := range []struct{ name, path, body, reply, route string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
			`{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"You like tea."},"finish_reason":"stop"}]}`, "chat"},
		{"anthropic", "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"You like tea."}],"model":"claude-sonnet-4-6","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":4}}`, "messages"},
		{"responses", "/v1/responses", `{"model":"gpt-4o","input":"hi"}`,
			`{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"You like tea.","annotations":[]}]}],"usage":{"input_tokens":5,"output_tokens":4}}`, "responses"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, upstreamtest.JSON(http.StatusOK, tt.reply))
			c := gatedCapturer{got: make(chan memory.Exchange, 2), release: make(chan struct{}), ctxErr: make(chan error, 2)}
			g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() },
				Deps{Resolver: identity.New(nil), Capturer: c})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Memory-User", "alice")
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			ex := wait(t, c.got, "the exchange to be handed to the Capturer")
			cancel()
			if err := wait(t, done, "the client to hang up"); err == nil {
				t.Fatal("the client got its answer before its turn was stored")
			}
			close(c.release)
			if err := wait(t, c.ctxErr, "the capture to end"); err != nil {
				t.Errorf("the capture's context ended with the client: %v", err)
			}
			if ex.User != "alice" || len(ex.Turn) != 1 || ex.Turn[0].Content != "hi" || ex.Reply.Content != "You like tea." {
				t.Errorf("exchange: user %q, turn %+v, reply %+v", ex.User, ex.Turn, ex.Reply)
			}
			// The answer went into a connection the client had left, which
			// a write does not tell: the request ends as answered.
			g.waitMetric(t, `memgate_http_requests_total{route="`+tt.route+`",status="200"} 1`)
			if len(c.got) != 0 {
				t.Errorf("the exchange was captured twice: %+v", <-c.got)
			}
		})
	}
}
