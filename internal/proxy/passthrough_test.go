package proxy

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/upstreamtest"
)

func TestPassthroughRoutes(t *testing.T) {
	var responses strings.Builder
	for _, e := range upstreamtest.ResponsesEvents {
		responses.WriteString("event: " + e[0] + "\ndata: " + e[1] + "\n\n")
	}
	tests := []struct {
		name, method, path, body string
		wantBody                 string
		wantType                 string
	}{
		{"models", "GET", "/v1/models", "", `{"object":"list","data":[{"id":"gpt-4o-mini"`, "application/json"},
		{"embeddings", "POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi","x":{"y":1}}`, `{"object":"list","data":[{"object":"embedding"`, "application/json"},
		{"streaming responses", "POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true}`, responses.String(), "text/event-stream"},
		{"unknown route gets the upstream's 404", "GET", "/v1/nope?x=1&y=%2F", "", `{"error":{"message":"Unknown request URL."`, "application/json"},
		{"stored completions", "GET", "/v1/chat/completions?limit=2", "", `{"error"`, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, nil)
			g := mustGateway(t, up, nil, Deps{})
			req, _ := http.NewRequest(tt.method, g.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer sk-client")
			req.Header.Set("X-Memory-User", "alice")
			req.Header.Set("X-Custom", "kept")
			resp, b := do(t, req)
			if !strings.HasPrefix(string(b), tt.wantBody) {
				t.Errorf("body %s, want prefix %s", b, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("content type %q, want %q", ct, tt.wantType)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			sent := up.Last(t)
			wantPath, wantQuery, _ := strings.Cut(tt.path, "?")
			if sent.Method != tt.method || sent.Path != wantPath || sent.RawQuery != wantQuery {
				t.Errorf("upstream got %s %s?%s, want %s %s", sent.Method, sent.Path, sent.RawQuery, tt.method, tt.path)
			}
			if !bytes.Equal(sent.Body, []byte(tt.body)) {
				t.Errorf("upstream body %q, want %q", sent.Body, tt.body)
			}
			for k, want := range map[string]string{"Authorization": "Bearer sk-client", "X-Custom": "kept", "X-Memory-User": "", "X-Request-Id": resp.Header.Get("X-Request-Id")} {
				if got := sent.Header.Get(k); got != want {
					t.Errorf("upstream %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestPassthroughStreamsAsItArrives(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = "sk-gateway" }, Deps{})
	req, _ := http.NewRequestWithContext(context.Background(), "POST", g.URL+"/v1/completions", strings.NewReader(`{"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	feed.SendRaw(t, "event: response.created\ndata: {}\n\n")
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "event: response.created\ndata: {}\n\n" {
		t.Fatalf("first event %q, %v", buf[:n], err)
	}
	feed.End(t)
	if got := up.Last(t).Header.Get("Authorization"); got != "Bearer sk-gateway" {
		t.Errorf("upstream Authorization %q, want the configured key", got)
	}
}

func TestPassthroughUpstreamDown(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.BaseURL = "http://127.0.0.1:1/v1" }, Deps{})
	req, _ := http.NewRequest("GET", g.URL+"/v1/models", nil)
	resp, b := do(t, req)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", resp.StatusCode, b)
	}
	if _, code, _ := apiErrorBody(t, b); code != "upstream_error" {
		t.Errorf("code %q", code)
	}
}
