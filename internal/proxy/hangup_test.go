package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// Events of a Responses stream: response.created, and a message at an
// output index, one text part, added to done.
var (
	respCreated = sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)
)

// respMessage returns the events of a whole message at output index out
// saying text: added, its part added, a delta, its done events.
func respMessage(out int, text string) []string {
	id := fmt.Sprintf("msg_%d", out)
	q, _ := json.Marshal(text)
	return []string{
		sseEvent("response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","output_index":%d,"item":{"id":%q,"type":"message","status":"in_progress","role":"assistant","content":[]}}`, out, id)),
		sseEvent("response.content_part.added", fmt.Sprintf(`{"type":"response.content_part.added","output_index":%d,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`, out)),
		sseEvent("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","output_index":%d,"content_index":0,"delta":%s}`, out, q)),
		sseEvent("response.output_text.done", fmt.Sprintf(`{"type":"response.output_text.done","output_index":%d,"content_index":0,"text":%s}`, out, q)),
		sseEvent("response.content_part.done", fmt.Sprintf(`{"type":"response.content_part.done","output_index":%d,"content_index":0,"part":{"type":"output_text","text":%s,"annotations":[]}}`, out, q)),
		sseEvent("response.output_item.done", fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":{"id":%q,"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":%s,"annotations":[]}]}}`, out, id, q)),
	}
}

// respCall returns the events of a whole function call at output index
// out.
func respCall(out int) []string {
	return []string{
		sseEvent("response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","output_index":%d,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"get_weather","arguments":""}}`, out)),
		sseEvent("response.function_call_arguments.delta", fmt.Sprintf(`{"type":"response.function_call_arguments.delta","output_index":%d,"delta":"{\"city\":\"Lisbon\"}"}`, out)),
		sseEvent("response.function_call_arguments.done", fmt.Sprintf(`{"type":"response.function_call_arguments.done","output_index":%d,"arguments":"{\"city\":\"Lisbon\"}"}`, out)),
		sseEvent("response.output_item.done", fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Lisbon\"}"}}`, out)),
	}
}

// respCompleted is response.completed with usage and no output (the
// reply is read from the items streamed).
var respCompleted = sseEvent("response.completed", `{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}}}`)

const (
	respToolsBody = `{"model":"gpt-4o","stream":true,"input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{}}}]}`
	respPlainBody = `{"model":"gpt-4o","stream":true,"input":"hi"}`
)

// waitReadOn waits until the gateway reads on the upstream of a stream
// whose client hung up (its in-flight gauge at 1), failing at once when
// the upstream request is cancelled instead.
func waitReadOn(t *testing.T, g *gateway, feed *upstreamtest.Feed) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(g.metrics(t), "\nmemgate_hangup_reads_in_flight 1\n") {
		select {
		case <-feed.Canceled():
			t.Fatal("the upstream request was cancelled with the client, though the stream had shown a whole answer")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the gateway to read on after the hang-up")
		}
	}
}

// TestHangUpAfterAnswerReadsOnToTheEnd: a client that hangs up once the
// stream showed a whole answer (a Responses message done, on a request
// that offered tools too) does not cancel the upstream: the gateway reads
// the rest of the stream without it and stores the exchange as the
// upstream finished it, once — the function call that followed the
// message, the second message of a tool-less reply.
func TestHangUpAfterAnswerReadsOnToTheEnd(t *testing.T) {
	msg := respMessage(0, "Let me check.")
	for _, tt := range []struct {
		name, body string
		rest       []string
		content    string
		calls      int
	}{
		{"responses with tools, a function call follows", respToolsBody, append(respCall(1), respCompleted), "Let me check.\n[tool_call get_weather({\"city\":\"Lisbon\"})]", 1},
		{"responses with tools, completed follows", respToolsBody, []string{respCompleted}, "Let me check.", 0},
		{"responses without tools, a second message follows", respPlainBody, append(respMessage(1, "It is sunny."), respCompleted), "Let me check.It is sunny.", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, feed, captured, cancel := relayedStreamOn(t, "/v1/responses", tt.body, append([]string{respCreated}, msg...)...)
			cancel()
			waitReadOn(t, g, feed)
			for _, e := range tt.rest {
				feed.SendRaw(t, e)
			}
			feed.Close(t)
			ex := wait(t, captured, "the exchange to be captured")
			if ex.User != "alice" || len(ex.Turn) != 1 || ex.Turn[0].Content != "hi" {
				t.Errorf("exchange: user %q, turn %+v", ex.User, ex.Turn)
			}
			calls := ex.Reply.Decoded().Calls
			if ex.Reply.Content != tt.content || len(calls) != tt.calls {
				t.Fatalf("reply %q with %d calls, want %q with %d", ex.Reply.Content, len(calls), tt.content, tt.calls)
			}
			if tt.calls == 1 && (calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Lisbon"}`) {
				t.Errorf("call %+v", calls[0])
			}
			if ex.Usage == nil || ex.Usage.CompletionTokens != 9 {
				t.Errorf("usage %+v, want the completed response's", ex.Usage)
			}
			g.waitMetric(t, `memgate_hangup_reads_total{outcome="completed"} 1`)
			g.waitMetric(t, `memgate_http_requests_total{route="responses",status="499"} 1`)
			g.p.Wait()
			if len(captured) != 0 {
				t.Errorf("the exchange was captured twice: %+v", <-captured)
			}
		})
	}
}

// TestHangUpMidAnswerCancelsUpstream: a client that hangs up before the
// stream showed a whole answer (a stop button) cancels the upstream
// request at once, and nothing is stored, on every API alike.
func TestHangUpMidAnswerCancelsUpstream(t *testing.T) {
	msg := respMessage(0, "Let me check.")
	for _, tt := range []struct {
		name, path, body, route string
		events                  []string
	}{
		{"responses with tools", "/v1/responses", respToolsBody, "responses", append([]string{respCreated}, msg[:3]...)},
		{"responses with tools, before its message's done", "/v1/responses", respToolsBody, "responses", append([]string{respCreated}, msg[:5]...)},
		{"responses without tools", "/v1/responses", respPlainBody, "responses", append([]string{respCreated}, msg[:4]...)},
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "chat",
			[]string{"data: " + chatChunk(`{"role":"assistant","content":"You like "}`, "null") + "\n\n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, feed, captured, cancel := relayedStreamOn(t, tt.path, tt.body, tt.events...)
			cancel()
			wait(t, feed.Canceled(), "upstream request to be cancelled")
			g.waitMetric(t, `memgate_http_requests_total{route="`+tt.route+`",status="499"} 1`)
			g.p.Wait()
			if len(captured) != 0 {
				t.Fatalf("a reply cut off mid-answer was captured: %+v", <-captured)
			}
		})
	}
}

// TestHangUpReadOnBounded: an upstream that stalls after the client hung
// up is read on only for the bound (Options.HangUpReadOn), then cancelled,
// and the exchange stored by the rule of a hang-up: what was whole when
// the client hung up (the first message of a tool-less reply, not the
// second one begun after), else nothing (a request with tools: a
// function call may have followed).
func TestHangUpReadOnBounded(t *testing.T) {
	msg := respMessage(0, "You like tea.")
	second := respMessage(1, "More.")
	for _, tt := range []struct {
		name, path, body string
		events, after    []string
		stored           string
	}{
		{"responses without tools, a second message begun", "/v1/responses", respPlainBody, append([]string{respCreated}, msg...), second[:3], "You like tea."},
		{"responses without tools, silent", "/v1/responses", respPlainBody, append([]string{respCreated}, msg...), nil, "You like tea."},
		{"responses with tools, silent", "/v1/responses", respToolsBody, append([]string{respCreated}, msg...), nil, ""},
		{"responses with tools, a call begun", "/v1/responses", respToolsBody, append([]string{respCreated}, msg...), respCall(1)[:2], ""},
		{"chat after finish_reason", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"data: " + chatChunk(`{"role":"assistant","content":"You like tea."}`, "null") + "\n\n", "data: " + chatChunk(`{}`, `"stop"`) + "\n\n"}, nil, "You like tea."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, feed, captured, cancel := relayedStreamReadOn(t, 3*time.Second, tt.path, tt.body, tt.events...)
			cancel()
			waitReadOn(t, g, feed)
			for _, e := range tt.after {
				feed.SendRaw(t, e)
			}
			wait(t, feed.Canceled(), "the upstream request to be cancelled at the bound")
			g.waitMetric(t, `memgate_hangup_reads_total{outcome="timeout"} 1`)
			route := "responses"
			if tt.path == "/v1/chat/completions" {
				route = "chat"
			}
			g.waitMetric(t, `memgate_http_requests_total{route="`+route+`",status="499"} 1`)
			g.p.Wait()
			if tt.stored == "" {
				if len(captured) != 0 {
					t.Fatalf("a reply not whole at the hang-up was captured: %+v", <-captured)
				}
				return
			}
			ex := wait(t, captured, "the exchange to be captured")
			if ex.Reply.Content != tt.stored {
				t.Errorf("reply %q, want %q", ex.Reply.Content, tt.stored)
			}
			if len(captured) != 0 {
				t.Errorf("the exchange was captured twice: %+v", <-captured)
			}
		})
	}
}

// TestHangUpReadOnEndsAtDrain: at shutdown, the drain of the proxy's
// captures ends reading on at once (the upstream request cancelled), and
// waits for the turn to be stored as it was whole when the client hung
// up: the client saw it whole, and the drain ending the read loses
// nothing.
func TestHangUpReadOnEndsAtDrain(t *testing.T) {
	g, feed, captured, cancel := relayedStreamOn(t, "/v1/responses", respPlainBody, append([]string{respCreated}, respMessage(0, "You like tea.")...)...)
	cancel()
	waitReadOn(t, g, feed)
	// A second message begun after the hang-up is not stored.
	for _, e := range respMessage(1, "More.")[:3] {
		feed.SendRaw(t, e)
	}
	drained := make(chan struct{})
	go func() { g.p.Drain(); close(drained) }()
	wait(t, feed.Canceled(), "the upstream request to be cancelled at the drain")
	wait(t, drained, "the drain to end")
	// The drain returned: the turn was stored before it did.
	if len(captured) != 1 {
		t.Fatalf("%d exchanges captured by the end of the drain, want 1 (the turn whole at the hang-up)", len(captured))
	}
	if ex := <-captured; ex.Reply.Content != "You like tea." {
		t.Errorf("reply %q, want %q", ex.Reply.Content, "You like tea.")
	}
	g.waitMetric(t, `memgate_hangup_reads_total{outcome="shutdown"} 1`)
	if m := g.metrics(t); strings.Contains(m, `memgate_capture_skipped_total{reason="shutdown"} 1`) {
		t.Error("the turn read on at the drain was counted as not captured, shutdown")
	}
}
