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
			captured := make(chanCapturer, 1)
			up := upstreamtest.New(t, scriptedStream(tc.body))
			g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Capturer: captured})
			resp, got := g.post(t, "/v1/chat/completions", streamChat, map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"})
			if resp.StatusCode != 200 || string(got) != tc.body {
				t.Fatalf("status %d, relayed %q, want the upstream's bytes", resp.StatusCode, got)
			}
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
