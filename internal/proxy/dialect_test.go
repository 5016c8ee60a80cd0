package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// anthropicErrorBody decodes an Anthropic-shaped error body, failing the
// test when it is not one.
func anthropicErrorBody(tb testing.TB, b []byte) (typ, msg string) {
	tb.Helper()
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error == nil || e.Error.Type == "" || e.Error.Message == "" {
		tb.Fatalf("not an Anthropic error body: %s", b)
	}
	return e.Error.Type, e.Error.Message
}

const claudeBody = `{"model":"claude-sonnet-4-6","max_tokens":64,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"Hi there"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`

var claudeHeaders = map[string]string{"X-Api-Key": "sk-ant-client", "Anthropic-Version": "2023-06-01", "X-Memory-User": "alice"}

func TestMessagesErrorsInAnthropicShape(t *testing.T) {
	capt := make(chanCapturer, 4)
	key := "gw-key"
	withKeys := func(c *gatewayConfig) { c.Keys = []identity.Key{{Hash: identity.HashKey(key), Tenant: "acme"}} }
	tests := []struct {
		name       string
		mutate     func(*gatewayConfig)
		body       string
		header     map[string]string
		wantStatus int
		wantType   string
		wantMsg    string
	}{
		{"malformed", nil, `{"model":`, claudeHeaders, 400, "invalid_request_error", ""},
		{"no messages", nil, `{"model":"claude-sonnet-4-6","max_tokens":5}`, claudeHeaders, 400, "invalid_request_error", "messages must be"},
		{"bad role", nil, `{"model":"claude-sonnet-4-6","messages":[{"role":"robot","content":"x"}]}`, claudeHeaders, 400, "invalid_request_error", "messages[0]:"},
		{"bad budget", nil, claudeBody, map[string]string{"X-Memory-User": "alice", "X-Memory-Budget": "lots"}, 400, "invalid_request_error", "X-Memory-Budget"},
		{"bad user header", nil, claudeBody, map[string]string{"X-Memory-User": "a b"}, 400, "invalid_request_error", "X-Memory-User"},
		{"no gateway key", withKeys, claudeBody, claudeHeaders, 401, "authentication_error", "gateway key"},
		{"too large", func(c *gatewayConfig) { c.MaxBodyBytes = 32 }, claudeBody, claudeHeaders, 413, "request_too_large", ""},
		{"upstream down", func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = "http://127.0.0.1:1/v1"; c.Upstream.Retries = 0 },
			claudeBody, claudeHeaders, 502, "api_error", "upstream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, fake := dialectGateway(t, rememberingPreparer(nil), capt, tt.mutate)
			resp, b := g.post(t, "/v1/messages", tt.body, tt.header)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			typ, msg := anthropicErrorBody(t, b)
			if typ != tt.wantType || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("error %s %q, want %s mentioning %q", typ, msg, tt.wantType, tt.wantMsg)
			}
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("%d requests went upstream", n)
			}
		})
	}
	select {
	case ex := <-capt:
		t.Errorf("a failed request was captured: %+v", ex)
	default:
	}
}

func TestResponsesErrorsInOpenAIShape(t *testing.T) {
	g, fake := dialectGateway(t, rememberingPreparer(nil), nil, nil)
	for body, param := range map[string]string{
		`{"model":"gpt-4.1"}`:                   "input",
		`{"input":"hi"}`:                        "model",
		`{"model":"gpt-4.1","input":[1]}`:       "input[0]",
		`{"model":"gpt-4.1","input":"hi","x":}`: "",
	} {
		resp, b := g.post(t, "/v1/responses", body, map[string]string{"X-Memory-User": "alice"})
		if resp.StatusCode != 400 {
			t.Fatalf("%s: status %d: %s", body, resp.StatusCode, b)
		}
		if typ, _, p := apiErrorBody(t, b); typ != "invalid_request_error" || p != param {
			t.Errorf("%s: error %s param %q, want %q", body, typ, p, param)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d requests went upstream", n)
	}
}

// TestMessagesPreservesTheBody: with memory the client's system blocks
// (cache_control included) and content blocks (an image) go upstream as
// sent, memory added after them; without memory the body goes byte for
// byte; a failing memory layer degrades to the client's body.
func TestMessagesPreservesTheBody(t *testing.T) {
	failing := preparerFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{}, errors.New("store down")
	})
	for _, tc := range []struct {
		name     string
		prep     Preparer
		header   map[string]string
		memory   bool
		degraded bool
	}{
		{"memory", rememberingPreparer(nil), claudeHeaders, true, false},
		{"no user", rememberingPreparer(nil), map[string]string{"X-Api-Key": "k", "Anthropic-Version": "2023-06-01"}, false, false},
		{"memory off", rememberingPreparer(nil), map[string]string{"X-Api-Key": "k", "Anthropic-Version": "2023-06-01", "X-Memory-User": "alice", "X-Memory-Mode": "off"}, false, false},
		{"degraded", failing, claudeHeaders, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, fake := dialectGateway(t, tc.prep, nil, nil)
			resp, b := g.post(t, "/v1/messages", claudeBody, tc.header)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if got := resp.Header.Get("X-Memory-Degraded") != ""; got != tc.degraded {
				t.Errorf("degraded %v, want %v", got, tc.degraded)
			}
			sent := fake.Requests()[0].Body
			if !tc.memory {
				if string(sent) != claudeBody {
					t.Errorf("body changed without memory:\n got %s\nwant %s", sent, claudeBody)
				}
				return
			}
			var body struct {
				System   []json.RawMessage `json:"system"`
				Messages []json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(sent, &body); err != nil {
				t.Fatal(err)
			}
			if len(body.System) != 2 || string(body.System[0]) != `{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}` ||
				!strings.Contains(string(body.System[1]), memoryFact) {
				t.Errorf("system %s", body.System)
			}
			last := body.Messages[len(body.Messages)-1]
			if string(last) != `{"role":"user","content":[{"type":"text","text":"Hi there"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}` {
				t.Errorf("client message changed: %s", last)
			}
			if resp.Header.Get("X-Memory-Tokens-Sent") != "90" {
				t.Errorf("X-Memory-Tokens-Sent %q", resp.Header.Get("X-Memory-Tokens-Sent"))
			}
		})
	}
}

// TestMessagesCredentials: the client's x-api-key and Authorization pass
// through; with gateway keys Authorization carries the gateway key and is
// dropped, x-api-key still passing; a configured Anthropic key replaces
// both. The OpenAI key never reaches Anthropic.
func TestMessagesCredentials(t *testing.T) {
	const gw = "gw-secret"
	keys := []identity.Key{{Hash: identity.HashKey(gw), Tenant: "acme"}}
	for _, tc := range []struct {
		name              string
		mutate            func(*gatewayConfig)
		header            map[string]string
		wantKey, wantAuth string
	}{
		{"pass through", func(c *gatewayConfig) { c.Upstream.APIKey = "sk-openai" },
			map[string]string{"X-Api-Key": "sk-ant-client", "Authorization": "Bearer sk-ant-bearer"}, "sk-ant-client", "Bearer sk-ant-bearer"},
		{"gateway keys", func(c *gatewayConfig) { c.Keys = keys },
			map[string]string{"X-Api-Key": "sk-ant-client", "Authorization": "Bearer " + gw}, "sk-ant-client", ""},
		{"configured key", func(c *gatewayConfig) { c.Keys = keys; c.Upstream.Anthropic.APIKey = "sk-ant-gateway" },
			map[string]string{"X-Api-Key": "sk-ant-client", "Authorization": "Bearer " + gw}, "sk-ant-gateway", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, fake := dialectGateway(t, rememberingPreparer(nil), nil, tc.mutate)
			h := map[string]string{"Anthropic-Version": "2023-06-01", "Anthropic-Beta": "prompt-caching-2024-07-31", "X-Memory-User": "alice"}
			for k, v := range tc.header {
				h[k] = v
			}
			resp, b := g.post(t, "/v1/messages", claudeBody, h)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			got := fake.Requests()[0].Header
			if got.Get("X-Api-Key") != tc.wantKey || got.Get("Authorization") != tc.wantAuth ||
				got.Get("Anthropic-Version") != "2023-06-01" || got.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" {
				t.Errorf("upstream headers %v", got)
			}
		})
	}
}

// TestAnthropicPassthroughRoutes: the other /v1/messages routes go to the
// Anthropic upstream, the rest of /v1 to the OpenAI one.
func TestAnthropicPassthroughRoutes(t *testing.T) {
	openai := upstreamtest.New(t, nil)
	claude := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"input_tokens":3}`))
	}))
	g := mustGateway(t, openai, func(c *gatewayConfig) {
		c.Upstream.Anthropic.BaseURL = claude.URL()
		c.Upstream.APIKey = "sk-openai"
	}, Deps{})
	resp, b := g.post(t, "/v1/messages/count_tokens", `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Api-Key": "sk-ant"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	last := claude.Last(t)
	if !strings.HasSuffix(last.Path, "/messages/count_tokens") || last.Header.Get("X-Api-Key") != "sk-ant" || last.Header.Get("Authorization") != "" {
		t.Errorf("anthropic upstream got %s %v", last.Path, last.Header)
	}
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/models", nil)
	if resp, b := do(t, req); resp.StatusCode != 200 {
		t.Fatalf("models: %d %s", resp.StatusCode, b)
	}
	if openai.Last(t).Header.Get("Authorization") != "Bearer sk-openai" {
		t.Errorf("openai upstream got %v", openai.Last(t).Header)
	}
}

// TestDialectRouteMetrics: each API is its own route in metrics.
func TestDialectRouteMetrics(t *testing.T) {
	g, _ := dialectGateway(t, rememberingPreparer(nil), nil, nil)
	if resp, b := g.post(t, "/v1/messages", claudeBody, claudeHeaders); resp.StatusCode != 200 {
		t.Fatalf("messages: %d %s", resp.StatusCode, b)
	}
	if resp, b := g.post(t, "/v1/responses", `{"model":"gpt-4.1","input":"hi"}`, map[string]string{"Authorization": "Bearer k"}); resp.StatusCode != 200 {
		t.Fatalf("responses: %d %s", resp.StatusCode, b)
	}
	g.waitMetric(t, `memgate_http_requests_total{route="messages",status="200"} 1`)
	g.waitMetric(t, `memgate_http_requests_total{route="responses",status="200"} 1`)
	if !strings.Contains(g.logs.String(), `"route":"messages"`) {
		t.Errorf("no access log line for route messages")
	}
}
