package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// scriptedStream is an upstream that answers every request with body as a
// text/event-stream.
func scriptedStream(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(body))
	})
}

// relayScripted posts body to path for alice in conversation c1 through a
// gateway whose upstream (OpenAI and Anthropic alike) answers with stream,
// and fails t unless the client got stream byte for byte with a 200. It
// returns the gateway and the channel its Capturer sends to.
func relayScripted(t *testing.T, path, body, stream string) (*gateway, chanCapturer) {
	t.Helper()
	captured := make(chanCapturer, 1)
	up := upstreamtest.New(t, scriptedStream(stream))
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() },
		Deps{Resolver: identity.New(nil), Capturer: captured})
	resp, got := g.post(t, path, body, map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"})
	if resp.StatusCode != 200 || string(got) != stream {
		t.Fatalf("status %d, relayed %q, want the upstream's bytes", resp.StatusCode, got)
	}
	return g, captured
}

// TestCaptureOfProviderStreamShapes: stream shapes some providers send are
// captured, relayed byte for byte.
func TestCaptureOfProviderStreamShapes(t *testing.T) {
	const streamChat = `{"model":"deepseek-reasoner","stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`
	tests := []struct {
		name        string
		body        string
		wantContent string
		wantFailed  string
		wantRaw     []string
	}{
		{"an event whose JSON spans several data lines",
			"data: {\"choices\":[{\"index\":0,\n" +
				"data: \"delta\":{\"role\":\"assistant\",\"content\":\"Forty\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"-two\"},\"finish_reason\":\"stop\"}]}\r\n\r\n" +
				"data: [DONE]\n\n",
			"Forty-two", "", nil},
		{"reasoning_content streamed",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"6*7\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"=42\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"42\"},\"finish_reason\":\"stop\"}]}\n\n" +
				"data: [DONE]\n\n",
			"42", "", []string{`"reasoning_content":"6*7=42"`}},
		{"a mid-stream error event",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"It is \"}}]}\n\n" +
				"data: {\"error\":{\"message\":\"upstream overloaded\",\"type\":\"server_error\"}}\n\n",
			"It is ", "upstream overloaded", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, captured := relayScripted(t, "/v1/chat/completions", streamChat, tc.body)
			ex := wait(t, captured, "capture")
			if len(ex.Turn) != 1 || ex.Turn[0].Content != "What is 6 times 7?" {
				t.Fatalf("turn %+v: the user's turn must be stored", ex.Turn)
			}
			if ex.Reply.Content != tc.wantContent {
				t.Fatalf("reply %q, want %q (raw %s)", ex.Reply.Content, tc.wantContent, ex.Reply.Raw)
			}
			if tc.wantFailed != "" {
				if !ex.Reply.Failed() || !strings.Contains(string(ex.Reply.Raw), tc.wantFailed) {
					t.Fatalf("reply %s not marked failed with %q", ex.Reply.Raw, tc.wantFailed)
				}
			} else if ex.Reply.Failed() {
				t.Fatalf("reply %s marked failed", ex.Reply.Raw)
			}
			for _, w := range tc.wantRaw {
				if !strings.Contains(string(ex.Reply.Raw), w) {
					t.Errorf("reply %s lacks %s", ex.Reply.Raw, w)
				}
			}
		})
	}
}

// TestDegradedPartsAndTokensSaved: a part the Preparer left out is named in
// X-Memory-Degraded and counted by part; tokens saved count original − sent.
func TestDegradedPartsAndTokensSaved(t *testing.T) {
	prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
		return memory.Prepared{Messages: memory.Raws(req.Messages), TokensOriginal: 500, TokensSent: 120,
			Degraded: []string{memory.DegradedEmbedding}}, nil
	})
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Preparer: prep})
	for range 2 {
		resp, _ := g.post(t, "/v1/chat/completions", memoryChat, map[string]string{"X-Memory-User": "alice"})
		if resp.StatusCode != 200 || resp.Header.Get("X-Memory-Degraded") != "embedding" {
			t.Fatalf("status %d, X-Memory-Degraded %q", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"))
		}
	}
	g.waitMetric(t, `memgate_memory_degraded_total{part="embedding"} 2`)
	g.waitMetric(t, "memgate_memory_tokens_saved_total 760")
	g.waitMetric(t, "memgate_memory_tokens_sent_total 240")
	g.waitMetric(t, "memgate_memory_load_seconds_count 2")
}

// TestMidStreamErrorKeepsTheTurn: on every API, a stream the upstream
// breaks off with an error event (Anthropic's overloaded_error, the
// Responses API's response.failed or error) is relayed as sent, and the
// exchange is still captured: the user's turn, and the partial reply
// marked failed with the upstream's message, as on chat completions.
func TestMidStreamErrorKeepsTheTurn(t *testing.T) {
	const anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"It is \"}}\n\n"
	const responsesStart = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"o1\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"It is \"}\n\n"
	tests := []struct {
		name, path, body, stream, wantContent, wantFailed string
	}{
		{"anthropic error event", "/v1/messages",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
			anthropicStart + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			"It is ", "Overloaded"},
		{"anthropic error before message_start", "/v1/messages",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			"", "Overloaded"},
		{"responses response.failed", "/v1/responses",
			`{"model":"gpt-4o","stream":true,"input":"What is 6 times 7?"}`,
			responsesStart + "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model crashed\"},\"output\":[]}}\n\n",
			"It is ", "The model crashed"},
		{"responses error event", "/v1/responses",
			`{"model":"gpt-4o","stream":true,"input":"What is 6 times 7?"}`,
			responsesStart + "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"Stream interrupted\"}\n\n",
			"It is ", "Stream interrupted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, captured := relayScripted(t, tc.path, tc.body, tc.stream)
			ex := wait(t, captured, "capture")
			if len(ex.Turn) != 1 || ex.Turn[0].Content != "What is 6 times 7?" {
				t.Fatalf("turn %+v: the user's turn must be stored", ex.Turn)
			}
			if ex.Reply.Content != tc.wantContent || !ex.Reply.Failed() || !strings.Contains(string(ex.Reply.Raw), tc.wantFailed) {
				t.Fatalf("reply %s, want content %q marked failed with %q", ex.Reply.Raw, tc.wantContent, tc.wantFailed)
			}
		})
	}
}
