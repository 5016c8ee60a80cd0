package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestPassthroughPerTenant reproduces finding 5: with gateway keys, a
// tenant's key reached every provider route with the operator's key
// (GET /v1/chat/completions lists every tenant's stored completions). Now
// only the allow-listed routes go upstream; the others get 403 in the
// route's error shape and never reach the provider.
func TestPassthroughPerTenant(t *testing.T) {
	const key = "gw-tenant-a"
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey(key), Tenant: "a"}})
	tests := []struct {
		name, method, path, body string
		allow                    []string // nil: the default allow-list
		want                     int
		anthropic                bool
	}{
		{name: "stored completions", method: "GET", path: "/v1/chat/completions?limit=100", want: 403},
		{name: "one stored completion", method: "GET", path: "/v1/chat/completions/chatcmpl-1/messages", want: 403},
		{name: "delete stored completion", method: "DELETE", path: "/v1/chat/completions/chatcmpl-1", want: 403},
		{name: "files", method: "GET", path: "/v1/files", want: 403},
		{name: "stored response", method: "GET", path: "/v1/responses/resp_1", want: 403},
		{name: "batches", method: "POST", path: "/v1/batches", body: `{}`, want: 403},
		{name: "anthropic batches", method: "GET", path: "/v1/messages/batches", want: 403, anthropic: true},
		{name: "dot-dot out of models", method: "GET", path: "/v1/models/..%2Ffiles", want: 403},
		{name: "escaped slash", method: "GET", path: "/v1/models/x%2F..%2F..%2Ffiles", want: 403},
		{name: "models", method: "GET", path: "/v1/models", want: 200},
		{name: "one model", method: "GET", path: "/v1/models/gpt-4o-mini", want: 200},
		{name: "embeddings", method: "POST", path: "/v1/embeddings", body: `{"model":"m","input":"hi"}`, want: 200},
		{name: "count tokens", method: "POST", path: "/v1/messages/count_tokens", body: `{"model":"m","messages":[]}`, want: 200, anthropic: true},
		{name: "allow-listed files", method: "GET", path: "/v1/files", allow: []string{"GET /v1/files"}, want: 200},
		{name: "allow-list replaces defaults", method: "GET", path: "/v1/models", allow: []string{"GET /v1/files"}, want: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"object":"list","data":[]}`))
			}))
			g := mustGateway(t, up, func(c *gatewayConfig) {
				c.Upstream.APIKey = "sk-operator"
				c.Upstream.Anthropic.BaseURL = up.URL()
				c.Upstream.Anthropic.APIKey = "sk-ant-operator"
				if tt.allow != nil {
					c.Passthrough = tt.allow
				}
			}, Deps{Resolver: keyed})
			req, _ := http.NewRequest(tt.method, g.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+key)
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, b := do(t, req)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if tt.want == 200 {
				if up.Calls() != 1 {
					t.Fatalf("upstream calls %d, want 1", up.Calls())
				}
				return
			}
			if up.Calls() != 0 {
				t.Fatalf("a refused route reached the provider (%d calls)", up.Calls())
			}
			if tt.anthropic {
				var e struct {
					Type  string                `json:"type"`
					Error struct{ Type string } `json:"error"`
				}
				if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type != "permission_error" {
					t.Fatalf("not an Anthropic error: %s", b)
				}
				return
			}
			if typ, code, _ := apiErrorBody(t, b); typ != "permission_error" || code != "route_not_allowed" {
				t.Fatalf("error %s/%s: %s", typ, code, b)
			}
		})
	}
}

// TestPassthroughWithoutKeysUnchanged: without gateway keys every route
// still passes through (the client's own provider key goes upstream).
func TestPassthroughWithoutKeysUnchanged(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil)})
	req, _ := http.NewRequest("GET", g.URL+"/v1/files", nil)
	req.Header.Set("Authorization", "Bearer sk-client")
	do(t, req)
	if up.Calls() != 1 || up.Last(t).Path != "/v1/files" {
		t.Fatalf("upstream calls %d", up.Calls())
	}
}

// TestBrowserGuardOnMemoryRoutes reproduces finding 4 on the chat routes:
// with no gateway key, a page could post text/plain with a "user" (or, after
// a permissive preflight, X-Memory-User) and have the victim's memory put
// in the prompt, or reach the gateway under a rebinding name. Both are now
// refused before memory is read, in the route's shape; an SDK's request
// still goes through.
func TestBrowserGuardOnMemoryRoutes(t *testing.T) {
	chatBody := `{"model":"gpt-4o-mini","user":"victim","messages":[{"role":"user","content":"what do you know about me?"}]}`
	msgBody := `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name, path, body, ct, host, origin string
		want                               int
		code                               string
	}{
		{"cross-site text/plain", "/v1/chat/completions", chatBody, "text/plain", "", "https://evil.example", 403, "cross_origin_forbidden"},
		{"text/plain without origin", "/v1/chat/completions", chatBody, "text/plain", "", "", 415, "unsupported_media_type"},
		{"rebinding host", "/v1/responses", `{"model":"gpt-4o","input":"hi","user":"victim"}`, "application/json", "attacker.example:8080", "", 403, "host_not_allowed"},
		{"anthropic shape", "/v1/messages", msgBody, "text/plain", "", "https://evil.example", 403, "cross_origin_forbidden"},
		{"passthrough rebinding", "/v1/files", "", "", "attacker.example", "", 403, "host_not_allowed"},
		{"sdk", "/v1/chat/completions", chatBody, "application/json", "", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, nil)
			var called atomic.Int32
			prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
				called.Add(1)
				return memory.Prepared{Messages: memory.Raws(req.Messages)}, nil
			})
			g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() },
				Deps{Resolver: identity.New(nil), Preparer: prep, Browser: server.NewBrowserGuard("127.0.0.1:8080", nil, nil)})
			method := "POST"
			if tt.body == "" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, g.URL+tt.path, strings.NewReader(tt.body))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, b := do(t, req)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if tt.want == 200 {
				return
			}
			if up.Calls() != 0 || called.Load() != 0 {
				t.Fatalf("refused request reached upstream (%d) or memory (%d)", up.Calls(), called.Load())
			}
			if tt.path == "/v1/messages" {
				var e struct {
					Type  string                `json:"type"`
					Error struct{ Type string } `json:"error"`
				}
				if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type != "permission_error" {
					t.Fatalf("not an Anthropic error: %s", b)
				}
				return
			}
			if _, code, _ := apiErrorBody(t, b); code != tt.code {
				t.Fatalf("code %q, want %q: %s", code, tt.code, b)
			}
		})
	}
}

// TestFailedKeysLimited: a client presenting bad gateway keys gets 401
// until its attempts run out, then 429 with Retry-After, in the route's
// shape, without its key being checked.
func TestFailedKeysLimited(t *testing.T) {
	up := upstreamtest.New(t, nil)
	clock := time.Unix(1_700_000_000, 0)
	lim := server.NewFailureLimiter(3, time.Minute, 100, func() time.Time { return clock })
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey("good"), Tenant: "a"}})
	g := mustGateway(t, up, nil, Deps{Resolver: keyed, Limiter: lim})
	post := func(key string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		return do(t, req)
	}
	for i := 0; i < 3; i++ {
		if resp, b := post("guess"); resp.StatusCode != 401 {
			t.Fatalf("guess %d: status %d: %s", i, resp.StatusCode, b)
		}
	}
	resp, b := post("good")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("limited: status %d Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if _, code, _ := apiErrorBody(t, b); code != "too_many_failed_attempts" {
		t.Fatalf("code %q", code)
	}
	if up.Calls() != 0 {
		t.Fatalf("upstream calls %d", up.Calls())
	}
}

// TestMissingKeyNotCounted: a request that presents no gateway key — a
// browser's CORS preflight, which never carries one, or a page's simple
// POST — gets 401 but guesses nothing, so it takes nothing from its
// client's failed-key attempts: a web page cannot lock the browser's
// address out of the gateway.
func TestMissingKeyNotCounted(t *testing.T) {
	up := upstreamtest.New(t, nil)
	clock := time.Unix(1_700_000_000, 0)
	lim := server.NewFailureLimiter(3, time.Minute, 100, func() time.Time { return clock })
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey("good"), Tenant: "a"}})
	g := mustGateway(t, up, nil, Deps{Resolver: keyed, Limiter: lim})
	send := func(method, auth string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if method == http.MethodOptions {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return do(t, req)
	}
	for i := 0; i < 5; i++ {
		for _, c := range []struct{ method, auth string }{{http.MethodOptions, ""}, {http.MethodPost, ""}, {http.MethodPost, "Basic Zm9vOmJhcg=="}, {http.MethodPost, "Bearer "}} {
			if resp, b := send(c.method, c.auth); resp.StatusCode != 401 {
				t.Fatalf("%s with Authorization %q, round %d: status %d, want 401: %s", c.method, c.auth, i, resp.StatusCode, b)
			}
		}
	}
	if resp, b := send(http.MethodPost, "Bearer good"); resp.StatusCode != 200 {
		t.Fatalf("the right key after requests without one: status %d, want 200: %s", resp.StatusCode, b)
	}
}

// watchedBody is a request body that records whether it was read.
type watchedBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

func (b *watchedBody) Close() error { return nil }

// TestKeyCheckedBeforeBody: with gateway keys, a memory route refuses a
// request presenting no key or a wrong one without reading its body. It
// read the body first (up to max_body_bytes, for up to a minute, in a
// buffer as large as the declared length), so anyone reaching the port
// held that much of the gateway's memory per connection, key or not.
func TestKeyCheckedBeforeBody(t *testing.T) {
	up := upstreamtest.New(t, nil)
	cfg := testConfig(up)
	cfg.Upstream.Anthropic.BaseURL = up.URL()
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}})
	srv, _ := newGateway(t, cfg, Deps{Resolver: keyed}, nil, io.Discard)
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"/v1/messages":         `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/responses":        `{"model":"m","input":"hi"}`,
	}
	for path, body := range bodies {
		for _, auth := range []string{"", "Bearer wrong-key"} {
			t.Run(path+" "+auth, func(t *testing.T) {
				wb := &watchedBody{r: strings.NewReader(body)}
				req := httptest.NewRequest(http.MethodPost, path, wb)
				req.ContentLength = int64(len(body))
				req.Header.Set("Content-Type", "application/json")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, req)
				if rec.Code != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401: %s", rec.Code, rec.Body)
				}
				if wb.read.Load() {
					t.Fatal("the body of a request without a valid key was read")
				}
			})
		}
	}
	if up.Calls() != 0 {
		t.Fatalf("upstream called %d times", up.Calls())
	}
}

// TestRelayedDocumentsSandboxed: what the upstream answers is relayed under
// the gateway's origin, which the management API and the inspector share,
// and without a key a top-level navigation reaches /v1: a page the
// upstream serves (a file's content, an error page) opens sandboxed, so
// its script cannot read the memory of the gateway's origin. It opened as
// a document of that origin.
func TestRelayedDocumentsSandboxed(t *testing.T) {
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Write([]byte(`<script>fetch("/v1/memory/conversations?user=alice")</script>`))
	}))
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = "sk-operator" },
		Deps{Resolver: identity.New(nil), Browser: server.NewBrowserGuard("127.0.0.1:8080", nil, nil)})
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/files/file-1/content", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	resp, _ := do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	csp := resp.Header.Values("Content-Security-Policy")
	if !slices.Contains(csp, "sandbox") || !slices.Contains(csp, "default-src 'self'") {
		t.Fatalf("Content-Security-Policy %q, want the upstream's and sandbox", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("X-Content-Type-Options %q, want nosniff", got)
	}
}

// TestMemoryRoutesNeverUpgrade: a memory route's request goes upstream
// without the client's Upgrade. It went with it, so an upstream that
// switches protocols on it (a WebSocket mode of /v1/responses) would give
// the client a tunnel carrying the operator's key, every message of which
// passed memory, capture and the per-tenant checks of provider states by.
func TestMemoryRoutesNeverUpgrade(t *testing.T) {
	var upgrade atomic.Value
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upgrade.Store(r.Header.Get("Upgrade") + "|" + r.Header.Get("Connection"))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"resp_1","object":"response","status":"completed","output":[]}`))
	}))
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}})
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = "sk-operator" }, Deps{Resolver: keyed})
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/responses", strings.NewReader(`{"model":"m","input":"hi","store":false}`))
	req.Header.Set("Authorization", "Bearer gw-key")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, b := do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got, _ := upgrade.Load().(string); got != "|" {
		t.Fatalf("upstream got Upgrade|Connection %q, want neither", got)
	}
}

// TestTraceNotForwarded: TRACE never goes upstream. It went, on every
// passthrough route, with the operator's provider key, and an upstream
// that answers TRACE (Apache's default TraceEnable) echoes the request it
// received: the key, to whoever reaches the port.
func TestTraceNotForwarded(t *testing.T) {
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "message/http")
		r.Header.Write(w)
	}))
	g := mustGateway(t, up, func(c *gatewayConfig) {
		c.Upstream.APIKey = "sk-operator"
		c.Upstream.Anthropic.BaseURL = up.URL()
		c.Upstream.Anthropic.APIKey = "sk-ant-operator"
	}, Deps{Resolver: identity.New(nil)})
	for _, path := range []string{"/v1/models", "/v1/chat/completions", "/v1/messages/batches"} {
		req, _ := http.NewRequest(http.MethodTrace, g.URL+path, nil)
		if strings.HasPrefix(path, "/v1/messages") {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		resp, b := do(t, req)
		if resp.StatusCode != http.StatusMethodNotAllowed || strings.Contains(string(b), "sk-") {
			t.Fatalf("TRACE %s: status %d, want 405: %s", path, resp.StatusCode, b)
		}
	}
	if up.Calls() != 0 {
		t.Fatalf("TRACE reached the upstream %d times", up.Calls())
	}
}

// TestCheckedBodiesNotEncoded: a passthrough body the gateway reads to
// check the provider states it names goes upstream only when the gateway
// could read it: one sent with a Content-Encoding (gzip, which the
// Anthropic API decodes) is a 415. It went upstream unchecked: a token
// count naming another tenant's file read that file.
func TestCheckedBodiesNotEncoded(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := anthropicGateway(t, up, newFakeStates(), "POST /v1/messages/count_tokens")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_other"}}]}]}`))
	zw.Close()
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/messages/count_tokens", bytes.NewReader(gz.Bytes()))
	req.Header.Set("Authorization", "Bearer gw-key")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if resp, b := do(t, req); resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), `"type":"error"`) {
		t.Errorf("status %d, want 415 in Anthropic's shape: %s", resp.StatusCode, b)
	}
	if up.Calls() != 0 {
		t.Fatalf("an encoded body reached the upstream unchecked (%d calls)", up.Calls())
	}
}

// TestMemoryBodiesNotEncoded: a memory route's body sent with a
// Content-Encoding is a 415. Read as it came (as JSON), it went upstream
// with its Content-Encoding, for the provider to decode into a body the
// gateway never read.
func TestMemoryBodiesNotEncoded(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil)})
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "br")
	if resp, b := do(t, req); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("status %d, want 415: %s", resp.StatusCode, b)
	}
	if up.Calls() != 0 {
		t.Fatalf("upstream called %d times", up.Calls())
	}
}

// TestGatewayKeyIdentity: with gateway keys, a memory route's identity
// is the key's tenant (or the one it may choose), the headers' user,
// conversation and mode, and, when no header names the user, the
// body's (its digest when not an id); a bad identity header is refused
// before the body is read, as a bad key is (TestKeyCheckedBeforeBody).
func TestGatewayKeyIdentity(t *testing.T) {
	reqs := make(chan memory.Request, 1)
	up := upstreamtest.New(t, nil)
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}, {Hash: identity.HashKey("gw-chooser"), Tenant: "b", ChooseTenant: true}})
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = "sk-operator" }, Deps{Resolver: keyed, Preparer: injecting(reqs)})
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	withUser := `{"model":"gpt-4o","user":"John Smith",` + msgs + `}`
	for _, tc := range []struct {
		name   string
		body   string
		header map[string]string
		want   memory.Identity
		mode   memory.Mode
	}{
		{"body user", withUser, nil, memory.Identity{Tenant: "a", User: memory.BodyUserID("John Smith")}, memory.ModeOn},
		{"body id", `{"model":"gpt-4o","user":"john",` + msgs + `}`, nil, memory.Identity{Tenant: "a", User: "john"}, memory.ModeOn},
		{"header user over the body's", withUser, map[string]string{"X-Memory-User": "ana"}, memory.Identity{Tenant: "a", User: "ana"}, memory.ModeOn},
		{"header user, no body user", `{"model":"gpt-4o",` + msgs + `}`, map[string]string{"X-Memory-User": "ana"}, memory.Identity{Tenant: "a", User: "ana"}, memory.ModeOn},
		{"conversation and mode", withUser, map[string]string{"X-Memory-Conversation": "trip", "X-Memory-Mode": "read"},
			memory.Identity{Tenant: "a", User: memory.BodyUserID("John Smith"), Conversation: "trip"}, memory.ModeRead},
		{"chosen tenant", withUser, map[string]string{"Authorization": "Bearer gw-chooser", "X-Memory-Tenant": "c"},
			memory.Identity{Tenant: "c", User: memory.BodyUserID("John Smith")}, memory.ModeOn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer gw-key"}
			for k, v := range tc.header {
				h[k] = v
			}
			resp, b := g.post(t, "/v1/chat/completions", tc.body, h)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			req := wait(t, reqs, "Prepare")
			got := req.Identity
			if tc.want.Conversation == "" {
				got.Conversation = "" // derived from the history
			}
			if got != tc.want || req.Mode != tc.mode {
				t.Errorf("identity %+v, mode %q; want %+v, %q", req.Identity, req.Mode, tc.want, tc.mode)
			}
		})
	}

	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"bad user header", map[string]string{"X-Memory-User": "John Smith"}, http.StatusBadRequest},
		{"repeated conversation header", map[string]string{"X-Memory-Conversation": "a,b"}, http.StatusBadRequest},
		{"bad mode", map[string]string{"X-Memory-Mode": "sometimes"}, http.StatusBadRequest},
		{"tenant not the key's", map[string]string{"X-Memory-Tenant": "c"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wb := &watchedBody{r: strings.NewReader(withUser)}
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", wb)
			req.ContentLength = int64(len(withUser))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer gw-key")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			g.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if wb.read.Load() {
				t.Fatal("the body of a request refused by its headers was read")
			}
		})
	}
}
