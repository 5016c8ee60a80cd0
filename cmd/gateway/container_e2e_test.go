package main

import (
	"io"
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
	gw := serveTwoTenants(t, up.URL)
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

// serveTwoTenants runs `gateway serve` with gateway keys key-a (tenant
// ta) and key-b (tenant tb) and the operator's keys for the OpenAI and
// Anthropic APIs of the provider at upURL, and returns its URL.
func serveTwoTenants(t *testing.T, upURL string) string {
	t.Helper()
	cfg := "keys:\n" +
		"  - hash: " + identity.HashKey("key-a") + "\n    tenant: ta\n" +
		"  - hash: " + identity.HashKey("key-b") + "\n    tenant: tb\n" +
		"memory:\n  load_timeout: 10s\ncompaction:\n  enabled: false\n"
	return serveConfigured(t, cfg, map[string]string{"GATEWAY_UPSTREAM_BASE_URL": upURL + "/v1", "GATEWAY_UPSTREAM_API_KEY": "sk-operator",
		"GATEWAY_ANTHROPIC_BASE_URL": upURL + "/v1", "GATEWAY_ANTHROPIC_API_KEY": "sk-ant-operator"})
}

// TestFileStaysWithItsTenant: with gateway keys and the operator's
// Anthropic key for every tenant, a file the code execution tool wrote
// (the file_id of a bash_code_execution_output in a Messages reply,
// whole or streamed) is its caller's: another tenant's request naming
// it — a document's file source, a container_upload — is answered as
// the provider answers an unknown file, without calling it, while its
// owner reads it; so is its download through the Files API.
// Run end to end: the real `gateway serve` with its SQLite store, in
// front of a provider speaking the Messages wire format.
func TestFileStaysWithItsTenant(t *testing.T) {
	var calls atomic.Int64 // the Messages and Files API requests (not the side model's)
	result := func(file string) string {
		return `{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"bash_code_execution_result",` +
			`"stdout":"","stderr":"","return_code":0,"content":[{"type":"bash_code_execution_output","file_id":"` + file + `"}]}}`
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.HasPrefix(r.URL.Path, "/v1/files") {
			calls.Add(1)
		}
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), "Plot it") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A chart."}],` +
				`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`))
			return
		}
		// The file the code writes is named after the stream member, so
		// the whole and the streamed replies write different files.
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"container\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":" + result("file_streamed") + "}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"container\":{\"id\":\"container_s\",\"expires_at\":\"2026-12-02T15:00:00Z\"}},\"usage\":{\"output_tokens\":1}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
			`{"type":"server_tool_use","id":"srvtoolu_1","name":"bash_code_execution","input":{"command":"python plot.py"}},` + result("file_whole") + `,` +
			`{"type":"text","text":"Saved."}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"container":{"id":"container_w","expires_at":"2026-12-02T15:00:00Z"},"usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	t.Cleanup(up.Close)
	gw := serveTwoTenants(t, up.URL)
	owner, other := caller{"key-a", "ann"}, caller{"key-b", "ann"}
	for _, tt := range []struct{ stream, file string }{{"false", "file_whole"}, {"true", "file_streamed"}} {
		create := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":` + tt.stream + `,"messages":[{"role":"user","content":"Plot it."}],` +
			`"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`
		if status, b := postJSON(t, gw+"/v1/messages", create, owner.headers()); status != http.StatusOK {
			t.Fatalf("the code run as %v: %d %s", owner, status, b)
		}
		for _, named := range []string{
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"` + tt.file + `"}},{"type":"text","text":"Describe it."}]}]}`,
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"` + tt.file + `"},{"type":"text","text":"Describe it."}]}],` +
				`"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`,
		} {
			before := calls.Load()
			status, b := postJSON(t, gw+"/v1/messages", named, other.headers())
			if status != http.StatusNotFound || !strings.Contains(string(b), "File with id '"+tt.file+"' not found.") || !strings.Contains(string(b), `"type":"error"`) {
				t.Errorf("%s as %v: %d %s, want a 404", tt.file, other, status, b)
			}
			if n := calls.Load() - before; n != 0 {
				t.Errorf("%s as %v: the upstream got %d requests, want none", tt.file, other, n)
			}
			if status, b := postJSON(t, gw+"/v1/messages", named, owner.headers()); status != http.StatusOK {
				t.Errorf("%s as its owner %v: %d %s", tt.file, owner, status, b)
			}
		}
	}
	// Through the Files API another's file is unknown (404), and an
	// OpenAI client's upload is the OpenAI route's, not allowed.
	before := calls.Load()
	req, _ := http.NewRequest(http.MethodGet, gw+"/v1/files/file_whole/content", nil)
	for k, v := range other.headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if status, _ := postJSON(t, gw+"/v1/files", `{}`, owner.headers()); resp.StatusCode != http.StatusNotFound || status != http.StatusForbidden {
		t.Errorf("the Files API: another's download %d, want 404; an OpenAI client's upload %d, want 403", resp.StatusCode, status)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the Files API reached the upstream %d times", n)
	}
}
