package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// initialize is an MCP initialize request body.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// mcpPost sends body to h's /mcp as a client at remote with hdr (a "Host"
// entry sets the request's Host), and returns the status and body.
func mcpPost(t *testing.T, h http.Handler, remote string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(body))
	r.RemoteAddr = remote
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// openAIError reports whether body is an OpenAI-shaped error.
func openAIError(body string) bool {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(body), &e) == nil && e.Error.Message != "" && e.Error.Type != ""
}

// TestMCPKeysAndTenants: /mcp follows the management API's key rule — no
// key is 401, a gateway key acts for its own tenant only (another tenant is
// 403), the admin key for the tenant it names — and the user of a tool is
// always scoped to that tenant.
func TestMCPKeysAndTenants(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	cfg := recallConfigs(t, up)["sqlite"](t)
	cfg.Keys = []config.Key{{Hash: identity.HashKey("key-a"), Tenant: "ta"}, {Hash: identity.HashKey("key-b"), Tenant: "tb"}}
	cfg.AdminKey = "admin-secret"
	g := startGateway(t, cfg)
	h := gatewayHandler(t, cfg, g)

	for name, hdr := range map[string]map[string]string{
		"no key":        nil,
		"wrong key":     {"Authorization": "Bearer nope"},
		"other tenant":  {"Authorization": "Bearer key-a", "X-Memory-Tenant": "tb"},
		"bad admin key": {"Authorization": "Bearer admin-secretx"},
	} {
		code, body := mcpPost(t, h, "127.0.0.1:5000", hdr, initialize)
		if (code != http.StatusUnauthorized && code != http.StatusForbidden) || !openAIError(body) {
			t.Errorf("%s: %d %s, want 401 or 403 in OpenAI's shape", name, code, body)
		}
	}

	a := mcpOverHTTP(t, g.URL, map[string]string{"Authorization": "Bearer key-a"})
	mustTool(t, a, "add_fact", map[string]any{"user": "u", "type": "preference", "key": "tea", "value": "drinks green tea"}, nil)
	b := mcpOverHTTP(t, g.URL, map[string]string{"Authorization": "Bearer key-b"})
	var facts factsAnswer
	mustTool(t, b, "list_facts", map[string]any{"user": "u"}, &facts)
	if len(facts.Facts) != 0 {
		t.Fatalf("tenant tb sees tenant ta's facts: %+v", facts.Facts)
	}
	adminTA := mcpOverHTTP(t, g.URL, map[string]string{"Authorization": "Bearer admin-secret", "X-Memory-Tenant": "ta"})
	mustTool(t, adminTA, "list_facts", map[string]any{"user": "u"}, &facts)
	if len(facts.Facts) != 1 || facts.Facts[0].Value != "drinks green tea" {
		t.Fatalf("the admin key on tenant ta lists %+v", facts.Facts)
	}
	adminDefault := mcpOverHTTP(t, g.URL, map[string]string{"Authorization": "Bearer admin-secret"})
	mustTool(t, adminDefault, "list_facts", map[string]any{"user": "u"}, &facts)
	if len(facts.Facts) != 0 {
		t.Fatalf("the admin key on the default tenant lists %+v", facts.Facts)
	}
	// The management API agrees on whose fact it is.
	if fs := apiFacts(t, g.URL, "u", map[string]string{"Authorization": "Bearer key-a"}); len(fs) != 1 {
		t.Fatalf("management API for tenant ta lists %+v", fs)
	}
}

// TestMCPWithoutKeys: with no key configured /mcp answers loopback peers
// only, and refuses what a web page could send: a foreign Host (DNS
// rebinding), another origin, a body that is not JSON.
func TestMCPWithoutKeys(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	cfg := recallConfigs(t, up)["sqlite"](t)
	cfg.Listen = "127.0.0.1:8080"
	g := startGateway(t, cfg)
	h := gatewayHandler(t, cfg, g)

	if code, body := mcpPost(t, h, "127.0.0.1:5000", nil, initialize); code != http.StatusOK || !strings.Contains(body, `"serverInfo"`) {
		t.Fatalf("loopback without a key: %d %s", code, body)
	}
	tests := []struct {
		name   string
		remote string
		hdr    map[string]string
		status int
	}{
		{"another host", "203.0.113.7:5000", nil, http.StatusForbidden},
		{"foreign Host name", "127.0.0.1:5000", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"cross-origin page", "127.0.0.1:5000", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site fetch", "127.0.0.1:5000", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"text/plain body", "127.0.0.1:5000", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := mcpPost(t, h, tt.remote, tt.hdr, initialize); code != tt.status || !openAIError(body) {
				t.Fatalf("%d %s, want %d in OpenAI's shape", code, body, tt.status)
			}
		})
	}
}

// gatewayHandler is the gateway's HTTP handler over g's memory, for
// requests from chosen peers.
func gatewayHandler(t *testing.T, cfg config.Config, g *testGateway) http.Handler {
	t.Helper()
	srv, err := newTestHTTP(cfg, g.mem.Core, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return srv.srv.Handler()
}

// TestMCPFailedKeysLimited: refused keys on /mcp count against the
// client's failed-key limit, as on the management API; past it, 429.
func TestMCPFailedKeysLimited(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	cfg := recallConfigs(t, up)["sqlite"](t)
	cfg.AdminKey = "admin-secret"
	cfg.Security.FailedAuthBurst = 2
	cfg.Security.FailedAuthRefill = config.Duration(time.Hour)
	g := startGateway(t, cfg)
	h := gatewayHandler(t, cfg, g)
	bad := map[string]string{"Authorization": "Bearer wrong"}
	for i := range 2 {
		if code, _ := mcpPost(t, h, "198.51.100.9:4000", bad, initialize); code != http.StatusUnauthorized {
			t.Fatalf("refused key %d: %d, want 401", i+1, code)
		}
	}
	if code, body := mcpPost(t, h, "198.51.100.9:4000", map[string]string{"Authorization": "Bearer admin-secret"}, initialize); code != http.StatusTooManyRequests {
		t.Fatalf("after the burst: %d %s, want 429", code, body)
	}
	if code, _ := mcpPost(t, h, "198.51.100.10:4000", map[string]string{"Authorization": "Bearer admin-secret"}, initialize); code != http.StatusOK {
		t.Fatalf("another client: %d, want 200", code)
	}
}
