package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/identity"
)

// TestContainerStaysWithItsTenant: with gateway keys and the operator's
// provider keys for every tenant, the container a reply's code ran in —
// a Responses code interpreter call's container_id, a Messages reply's
// container.id — is its caller's: another tenant's request naming it
// (tools[].container, the Messages container) is answered as the
// provider answers an unknown container, without calling it, while its
// owner runs in it again. Run end to end: the real `gateway serve` with
// its SQLite store, in front of a provider that runs code.
func TestContainerStaysWithItsTenant(t *testing.T) {
	var calls atomic.Int64 // the requests the provider runs code for (its side model's aside)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/responses":
			calls.Add(1)
			_, _ = w.Write([]byte(`{"id":"resp_ci","object":"response","status":"completed","model":"gpt-4.1","output":[` +
				`{"id":"ci_1","type":"code_interpreter_call","status":"completed","code":"print(1)","container_id":"cntr_ta","outputs":null},` +
				`{"id":"msg_ci","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"1","annotations":[]}]}],` +
				`"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`))
		case "/v1/messages":
			calls.Add(1)
			_, _ = w.Write([]byte(`{"id":"msg_ce","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"1"}],` +
				`"stop_reason":"end_turn","stop_sequence":null,"container":{"id":"container_ta","expires_at":"2026-12-02T15:00:00Z"},"usage":{"input_tokens":1,"output_tokens":1}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(up.Close)
	cfg := "keys:\n" +
		"  - hash: " + identity.HashKey("key-a") + "\n    tenant: ta\n" +
		"  - hash: " + identity.HashKey("key-b") + "\n    tenant: tb\n" +
		"memory:\n  load_timeout: 10s\ncompaction:\n  enabled: false\n"
	gw := serveConfigured(t, cfg, map[string]string{"GATEWAY_UPSTREAM_BASE_URL": up.URL + "/v1", "GATEWAY_UPSTREAM_API_KEY": "sk-operator",
		"GATEWAY_ANTHROPIC_BASE_URL": up.URL + "/v1", "GATEWAY_ANTHROPIC_API_KEY": "sk-ant-operator"})
	owner, other := caller{"key-a", "ann"}, caller{"key-b", "ann"}
	for _, tt := range []struct{ path, create, named, id string }{
		{"/v1/responses", `{"model":"gpt-4.1","input":"Run it.","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`,
			`{"model":"gpt-4.1","input":"Again.","tools":[{"type":"code_interpreter","container":"cntr_ta"}]}`, "cntr_ta"},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Run it."}],"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`,
			`{"model":"claude-sonnet-4-5","max_tokens":64,"container":"container_ta","messages":[{"role":"user","content":"Again."}]}`, "container_ta"},
	} {
		if status, b := postJSON(t, gw+tt.path, tt.create, owner.headers()); status != http.StatusOK {
			t.Fatalf("%s as %v: %d %s", tt.path, owner, status, b)
		}
		before := calls.Load()
		status, b := postJSON(t, gw+tt.path, tt.named, other.headers())
		if status != http.StatusNotFound || !strings.Contains(string(b), "Container with id '"+tt.id+"' not found.") {
			t.Errorf("%s naming %s as %v: %d %s, want a 404", tt.path, tt.id, other, status, b)
		}
		if n := calls.Load() - before; n != 0 {
			t.Errorf("%s naming %s as %v: the upstream got %d requests, want none", tt.path, tt.id, other, n)
		}
		if status, b := postJSON(t, gw+tt.path, tt.named, owner.headers()); status != http.StatusOK {
			t.Errorf("%s naming %s as its owner %v: %d %s", tt.path, tt.id, owner, status, b)
		}
	}
}
