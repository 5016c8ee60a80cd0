package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestKeysBadInputStoreNothing: gateway keys bind tenants; bad keys, bad ids
// and bad JSON get their status, never reach the upstream, and store nothing.
func TestKeysBadInputStoreNothing(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["sqlite"](t)
	cfg.Upstream.APIKey = "sk-upstream-secret"
	cfg.Keys = []config.Key{
		{Hash: identity.HashKey("key-acme"), Tenant: "acme"},
		{Hash: identity.HashKey("key-admin"), Tenant: "ops", ChooseTenant: true},
	}
	g := startGateway(t, cfg)

	tests := []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		param   string
	}{
		{"no key", map[string]string{"X-Memory-User": "u"}, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 401, ""},
		{"unknown key", map[string]string{"Authorization": "Bearer nope", "X-Memory-User": "u"}, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 401, ""},
		{"bound key choosing a tenant", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-Tenant": "globex", "X-Memory-User": "u"}, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 403, ""},
		{"bad user id", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-User": "bad user!"}, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400, "X-Memory-User"},
		{"bad conversation id", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-User": "u", "X-Memory-Conversation": strings.Repeat("c", 129)}, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400, "X-Memory-Conversation"},
		{"bad mode", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-User": "u", "X-Memory-Mode": "sometimes"}, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400, "X-Memory-Mode"},
		{"bad json", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-User": "u"}, `{"model":"m","messages":[`, 400, ""},
		{"empty messages", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-User": "u"}, `{"model":"m","messages":[]}`, 400, "messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.Calls()
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(tt.body))
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Message, Type string
					Param         *string
				} `json:"error"`
			}
			decodeBody(t, resp, &e)
			if resp.StatusCode != tt.status || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("status %d, error %+v", resp.StatusCode, e.Error)
			}
			if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Fatalf("param = %v, want %q", e.Error.Param, tt.param)
			}
			if up.Calls() != before {
				t.Fatal("upstream was called")
			}
		})
	}
	// Nothing was stored for any of them, in any tenant.
	for _, tenant := range []string{"acme", "globex", "ops", memory.DefaultTenant} {
		convs, err := g.mem.store.Conversations(context.Background(), tenant, "u")
		if err != nil || len(convs) != 0 {
			t.Fatalf("tenant %s: %d conversations stored (err %v)", tenant, len(convs), err)
		}
	}

	// A good key: its tenant is used, the upstream sees the configured key,
	// never the gateway key.
	r := chat(t, g.URL, map[string]string{"Authorization": "Bearer key-acme", "X-Memory-User": "u", "X-Memory-Conversation": "k"}, false, user("hello"))
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if got := lastChat(t, up).Header.Get("Authorization"); got != "Bearer sk-upstream-secret" {
		t.Fatalf("upstream Authorization = %q", got)
	}
	waitStored(t, g, memory.Identity{Tenant: "acme", User: "u", Conversation: "k"}, 2)
	// The admin key may act for another tenant, and sees nothing of acme's.
	st, body := do(t, http.MethodGet, g.URL+"/v1/memory/conversations?user=u", map[string]string{"Authorization": "Bearer key-admin", "X-Memory-Tenant": "globex"})
	if st != 200 || strings.Contains(body, `"k"`) {
		t.Fatalf("admin as globex: %d %s", st, body)
	}
	st, body = do(t, http.MethodGet, g.URL+"/v1/memory/conversations?user=u", map[string]string{"Authorization": "Bearer key-acme"})
	if st != 200 || !strings.Contains(body, `"k"`) {
		t.Fatalf("acme list: %d %s", st, body)
	}
	if st, _ := do(t, http.MethodGet, g.URL+"/v1/memory/conversations?user=u", map[string]string{"Authorization": "Bearer key-acme", "X-Memory-Tenant": "globex"}); st != 403 {
		t.Fatalf("bound key listing another tenant: %d", st)
	}
}

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode: %v", err)
	}
}
