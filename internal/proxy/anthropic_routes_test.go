package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestAnthropicClientModels: an Anthropic client's model list and lookup
// (the request carries anthropic-version; x-api-key alone is an
// OpenAI-compatible client's) go to the Anthropic upstream with its Anthropic
// credentials; an OpenAI client's to the OpenAI upstream; an Anthropic
// client's request for another route the gateway would send to the OpenAI
// upstream is refused in Anthropic's shape; its Files API requests go to
// the Anthropic upstream. A client's credentials never reach the provider
// they were not meant for.
func TestAnthropicClientModels(t *testing.T) {
	keys := []identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}}
	const claudeList = `{"data":[{"type":"model","id":"claude-sonnet-4-6","display_name":"Claude Sonnet 4.6","created_at":"2026-01-01T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-6","last_id":"claude-sonnet-4-6"}`
	for _, tt := range []struct {
		name string
		// keys: gateway keys; antKey: upstream.anthropic.api_key;
		// openaiKey: upstream.api_key.
		keys              bool
		antKey, openaiKey string
		path              string
		header            map[string]string
		// wantUp: "claude", "openai", or "" (refused, neither called,
		// with an Anthropic error of type refused).
		wantUp, refused string
		// wantHeader: the credential headers the upstream must see
		// ("" = absent).
		wantHeader map[string]string
	}{
		{"sdk list", false, "", "", "/v1/models", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"sdk list, openai key configured", false, "", "sk-openai", "/v1/models", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"sdk lookup", false, "", "", "/v1/models/claude-sonnet-4-6", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"sdk auth token", false, "", "", "/v1/models", map[string]string{"Authorization": "Bearer sk-ant-oat", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"Authorization": "Bearer sk-ant-oat", "X-Api-Key": ""}},
		{"x-api-key alone", false, "", "", "/v1/models", map[string]string{"X-Api-Key": "sk-ant"},
			"openai", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"openai client", false, "", "", "/v1/models", map[string]string{"Authorization": "Bearer sk-oa"},
			"openai", "", map[string]string{"Authorization": "Bearer sk-oa", "X-Api-Key": ""}},
		{"gateway keys, client's anthropic key", true, "", "", "/v1/models",
			map[string]string{"Authorization": "Bearer gw-key", "X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"gateway keys, operator's anthropic key", true, "sk-ant-operator", "sk-openai", "/v1/models",
			map[string]string{"Authorization": "Bearer gw-key", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant-operator", "Authorization": ""}},
		{"gateway keys, openai client", true, "sk-ant-operator", "sk-openai", "/v1/models",
			map[string]string{"Authorization": "Bearer gw-key"},
			"openai", "", map[string]string{"Authorization": "Bearer sk-openai", "X-Api-Key": ""}},
		{"sdk files", false, "", "", "/v1/files", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"gateway keys, sdk, files listed", true, "", "", "/v1/files",
			map[string]string{"Authorization": "Bearer gw-key", "X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"claude", "", map[string]string{"X-Api-Key": "sk-ant", "Authorization": ""}},
		{"sdk, another openai route", false, "", "", "/v1/vector_stores", map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"},
			"", "not_found_error", nil},
		{"gateway keys, sdk, another route listed", true, "", "", "/v1/vector_stores",
			map[string]string{"Authorization": "Bearer gw-key", "X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"}, "", "not_found_error", nil},
		{"gateway keys, sdk, another route not listed", true, "", "", "/v1/batches",
			map[string]string{"Authorization": "Bearer gw-key", "X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"}, "", "permission_error", nil},
		{"gateway keys, sdk, bad key, another route", true, "", "", "/v1/files",
			map[string]string{"Authorization": "Bearer nope", "X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"}, "", "authentication_error", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			openai := upstreamtest.New(t, modelsUpstream())
			claude := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if strings.HasSuffix(r.URL.Path, "/models") {
					w.Write([]byte(claudeList))
					return
				}
				w.Write([]byte(`{"type":"model","id":"claude-sonnet-4-6","display_name":"Claude Sonnet 4.6","created_at":"2026-01-01T00:00:00Z"}`))
			}))
			deps := Deps{}
			if tt.keys {
				deps = Deps{Resolver: identity.New(keys), States: newFakeStates()}
			}
			g := mustGateway(t, openai, func(c *gatewayConfig) {
				c.Upstream.APIKey = tt.openaiKey
				c.Upstream.Anthropic.BaseURL = claude.URL()
				c.Upstream.Anthropic.APIKey = tt.antKey
				c.Passthrough = append(c.Passthrough, "GET /v1/files", "GET /v1/vector_stores")
			}, deps)
			req, err := http.NewRequest(http.MethodGet, g.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, b := do(t, req)
			if tt.wantUp == "" {
				status := map[string]int{"not_found_error": 404, "permission_error": 403, "authentication_error": 401}[tt.refused]
				if resp.StatusCode != status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
				}
				if typ, msg := anthropicErrorBody(t, b); typ != tt.refused || msg == "" {
					t.Errorf("error %s %q, want %s", typ, msg, tt.refused)
				}
				if n, m := openai.Calls(), claude.Calls(); n+m != 0 {
					t.Errorf("the request went upstream: openai %d, anthropic %d", n, m)
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			got, other := claude, openai
			if tt.wantUp == "openai" {
				got, other = openai, claude
			}
			if n := other.Calls(); n != 0 {
				t.Fatalf("the other upstream got %d requests: %v", n, other.Last(t).Header)
			}
			last := got.Last(t)
			if want := "/v1" + strings.TrimPrefix(tt.path, "/v1"); last.Path != want {
				t.Errorf("%s upstream got path %s, want %s", tt.wantUp, last.Path, want)
			}
			for k, v := range tt.wantHeader {
				if g := last.Header.Get(k); g != v {
					t.Errorf("%s upstream got %s %q, want %q", tt.wantUp, k, g, v)
				}
			}
			if tt.wantUp == "claude" && tt.path == "/v1/models" && !jsonEqual(t, b, []byte(claudeList)) {
				t.Errorf("list %s, want the provider's %s", b, claudeList)
			}
		})
	}
}

// TestAnthropicRequestID: answers on the Anthropic routes carry
// request-id (what the Anthropic SDKs read as error.requestID): the
// gateway's own errors the gateway's request id (as X-Request-Id), a
// relayed answer the provider's own when it gave one.
func TestAnthropicRequestID(t *testing.T) {
	for _, tt := range []struct {
		name     string
		upstream http.HandlerFunc
		down     bool
		body     string
		// wantProvider: the request-id the provider set, "" for the
		// gateway's.
		wantProvider string
		wantStatus   int
	}{
		{"memgate's 400", nil, false, `{"model":`, "", 400},
		{"upstream down", nil, true, claudeBody, "", 502},
		{"provider's error with its id", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Request-Id", "req_provider")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`))
		}, false, claudeBody, "req_provider", 429},
		{"provider's error without an id", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"no"}}`))
		}, false, claudeBody, "", 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, tt.upstream)
			g := mustGateway(t, up, func(c *gatewayConfig) {
				c.Upstream.Anthropic.BaseURL = up.URL()
				if tt.down {
					c.Upstream.Anthropic.BaseURL = "http://127.0.0.1:1/v1"
					c.Upstream.Retries = 0
				}
			}, Deps{})
			resp, b := g.post(t, "/v1/messages", tt.body, map[string]string{"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01"})
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			want := tt.wantProvider
			if want == "" {
				want = resp.Header.Get("X-Request-Id")
			}
			if got := resp.Header.Values("Request-Id"); want == "" || len(got) != 1 || got[0] != want {
				t.Errorf("request-id %q, want [%q] (X-Request-Id %q)", got, want, resp.Header.Get("X-Request-Id"))
			}
		})
	}
}
