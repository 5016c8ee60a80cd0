package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestThinkingDisabledIsSaid: a client that sends only its tool result,
// extended thinking on, continues a stored call. When memgate holds no
// signed reasoning to replay the call with, the request goes upstream
// with thinking disabled — a change of the client's own request, which
// the response says (X-Memory-Thinking: disabled); a call replayed with
// its signed blocks goes as asked, and says nothing.
func TestThinkingDisabledIsSaid(t *testing.T) {
	const body = `{"model":"claude-sonnet-4-6","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"18C"}]}]}`
	call := func(signed string) json.RawMessage {
		m := `{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"toolu_a","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`
		if signed != "" {
			m += `,"thinking_blocks":` + signed
		}
		return json.RawMessage(m + `}`)
	}
	for _, tc := range []struct {
		name     string
		stored   json.RawMessage
		disabled bool
	}{
		{"unsigned call", call(""), true},
		{"signed call", call(`[{"type":"thinking","thinking":"call it","signature":"sig=="}]`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
				out := []json.RawMessage{json.RawMessage(`{"role":"user","content":"Weather in Porto?"}`), tc.stored}
				for _, m := range req.Messages {
					out = append(out, m.Raw)
				}
				return memory.Prepared{Messages: out, TokensOriginal: 10, TokensSent: 10}, nil
			})
			g, fake := dialectGateway(t, prep, nil, nil)
			resp, b := g.post(t, "/v1/messages", body, claudeHeaders)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			reqs := fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests upstream", len(reqs))
			}
			sentOff := bytes.Contains(reqs[0].Body, []byte(`"thinking":{"type":"disabled"}`))
			said := resp.Header.Get("X-Memory-Thinking") == "disabled"
			if sentOff != tc.disabled || said != tc.disabled {
				t.Errorf("thinking disabled upstream %v, said (X-Memory-Thinking %q) %v; want both %v:\n%s",
					sentOff, resp.Header.Get("X-Memory-Thinking"), said, tc.disabled, reqs[0].Body)
			}
		})
	}
}
