package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/upstreamtest"
)

func TestChatForwardsBodyUnchanged(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{})
	body := `{
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}], "x_vendor": {"a": [1, 2.50, null]}}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}}],
  "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
  "metadata": {"trace": "abc\u00e9\"q"},
  "future_field": {"nested": {"deep": [true, false, {"k": 1e3}]}},
  "temperature": 0.7,
  "max_completion_tokens": 100
}`
	resp, got := g.post(t, "/v1/chat/completions", body, map[string]string{"Authorization": "Bearer sk-client"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	sent := up.Last(t)
	if string(sent.Body) != body {
		t.Errorf("upstream body differs from the client's:\n got %s\nwant %s", sent.Body, body)
	}
	if a := sent.Header.Get("Authorization"); a != "Bearer sk-client" {
		t.Errorf("upstream Authorization = %q, want the client's", a)
	}
	if want := upstreamtest.Completion("gpt-4o-mini", upstreamtest.DefaultReply); string(got) != string(want) {
		t.Errorf("client body = %s, want upstream's %s", got, want)
	}
}

func TestChatUpstreamAuthAndHeaders(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = "sk-gateway" }, Deps{})
	resp, _ := g.post(t, "/v1/chat/completions", simpleChat, map[string]string{
		"Authorization":   "Bearer sk-client",
		"X-Memory-User":   "alice",
		"OpenAI-Beta":     "assistants=v2",
		"Accept-Encoding": "gzip",
		"Connection":      "keep-alive, X-Hop",
		"X-Hop":           "private",
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h := up.Last(t).Header
	for k, want := range map[string]string{
		"Authorization": "Bearer sk-gateway",
		"Openai-Beta":   "assistants=v2",
		"X-Memory-User": "",
		"X-Hop":         "",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("upstream %s = %q, want %q", k, got, want)
		}
	}
}

func TestRequestID(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{})
	tests := []struct {
		name, sent string
		echoed     bool
	}{
		{"echoed", "client-id-123", true},
		{"generated when absent", "", false},
		{"generated when invalid", "has space", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.sent != "" {
				h["X-Request-Id"] = tt.sent
			}
			resp, _ := g.post(t, "/v1/chat/completions", simpleChat, h)
			id := resp.Header.Get("X-Request-Id")
			if tt.echoed && id != tt.sent {
				t.Errorf("X-Request-Id = %q, want %q", id, tt.sent)
			}
			if !tt.echoed && (id == "" || id == tt.sent) {
				t.Errorf("X-Request-Id = %q, want a generated id", id)
			}
			if got := up.Last(t).Header.Get("X-Request-Id"); got != id {
				t.Errorf("upstream X-Request-Id = %q, want %q", got, id)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.MaxBodyBytes = 512 }, Deps{})
	tests := []struct {
		name   string
		body   string
		header map[string]string
		status int
		param  string
	}{
		{"malformed JSON", `{"model":"x","messages":[`, nil, 400, ""},
		{"trailing garbage", `{"model":"x","messages":[{"role":"user","content":"hi"}]} x`, nil, 400, ""},
		{"not an object", `[{"role":"user"}]`, nil, 400, ""},
		{"missing messages", `{"model":"x"}`, nil, 400, "messages"},
		{"null messages", `{"model":"x","messages":null}`, nil, 400, "messages"},
		{"messages not an array", `{"model":"x","messages":{"role":"user"}}`, nil, 400, "messages"},
		{"empty messages", `{"model":"x","messages":[ ]}`, nil, 400, "messages"},
		{"message without role", `{"model":"x","messages":[{"content":"hi"}]}`, nil, 400, "messages[0]"},
		{"message not an object", `{"model":"x","messages":[{"role":"user","content":"a"},"hi"]}`, nil, 400, "messages[1]"},
		{"bad content", `{"model":"x","messages":[{"role":"user","content":42}]}`, nil, 400, "messages[0]"},
		{"budget not a number", simpleChat, map[string]string{"X-Memory-Budget": "lots"}, 400, "X-Memory-Budget"},
		{"budget zero", simpleChat, map[string]string{"X-Memory-Budget": "0"}, 400, "X-Memory-Budget"},
		{"body too large", `{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", 600) + `"}]}`, nil, 413, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := g.post(t, "/v1/chat/completions", tt.body, tt.header)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			typ, _, param := apiErrorBody(t, b)
			if typ != "invalid_request_error" {
				t.Errorf("type %q, want invalid_request_error", typ)
			}
			if param != tt.param {
				t.Errorf("param %q, want %q", param, tt.param)
			}
		})
	}
	if n := up.Calls(); n != 0 {
		t.Errorf("upstream called %d times for bad input", n)
	}
}

func TestUpstreamErrorsPassThroughVerbatim(t *testing.T) {
	tests := []struct {
		name   string
		status int
	}{
		{"400", http.StatusBadRequest},
		{"401", http.StatusUnauthorized},
		{"404", http.StatusNotFound},
		{"500", http.StatusInternalServerError},
		{"503 after retries", http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, upstreamtest.Error(tt.status, "invalid_request_error", "some_code", "upstream says "+tt.name))
			g := mustGateway(t, up, nil, Deps{})
			resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if want := upstreamtest.ErrorBody("invalid_request_error", "some_code", "upstream says "+tt.name); string(b) != string(want) {
				t.Errorf("body %s, want upstream's %s", b, want)
			}
		})
	}
}

// TestOverLimitBodyOfUnknownLengthGets413: a chunked body that outgrows the
// limit is answered with a readable 413 (not a reset connection).
func TestOverLimitBodyOfUnknownLengthGets413(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.MaxBodyBytes = 512 }, Deps{})
	body := `{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"}]}`
	// A reader of unknown length makes the client send the body chunked.
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(body)))
	resp, b := do(t, req)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413: %s", resp.StatusCode, b)
	}
	if _, code, _ := apiErrorBody(t, b); code != "request_too_large" {
		t.Errorf("code %q, want request_too_large", code)
	}
	if up.Calls() != 0 {
		t.Error("upstream called")
	}
}
