package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// anthropicHeaders are an Anthropic SDK's headers (with the Files API
// beta) for caller c.
func anthropicHeaders(c caller) map[string]string {
	h := c.headers()
	h["Anthropic-Version"] = "2023-06-01"
	h["Anthropic-Beta"] = upstreamtest.FilesBeta
	return h
}

// anthropicError reads an Anthropic error body's type; "" when b is
// none.
func anthropicError(b string) string {
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(b), &e) != nil || e.Type != "error" || e.Error == nil || e.Error.Message == "" {
		return ""
	}
	return e.Error.Type
}

// TestAnthropicFilesEndToEnd: with gateway keys and the operator's
// Anthropic key, a tenant reads the file its code execution wrote — its
// metadata and its content, through the Files API, with the operator's
// key and the client's beta — and another tenant asking for it, or
// anyone for an id never given out, gets the provider's 404 without the
// provider hearing of it; the list, which holds every tenant's files,
// is refused. Run end to end: the real `gateway serve` with its SQLite
// store, in front of a provider speaking the Messages and Files wire
// formats.
func TestAnthropicFilesEndToEnd(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/messages", upstreamtest.JSON(http.StatusOK, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[`+
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"bash_code_execution","input":{"command":"python plot.py"}},`+
		`{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"bash_code_execution_result","stdout":"","stderr":"","return_code":0,`+
		`"content":[{"type":"bash_code_execution_output","file_id":"file_ta"}]}},{"type":"text","text":"Saved."}],"stop_reason":"end_turn","stop_sequence":null,`+
		`"container":{"id":"container_ta","expires_at":"2026-12-03T15:00:00Z"},"usage":{"input_tokens":1,"output_tokens":1}}`))
	files := upstreamtest.NewFiles(upstreamtest.File{ID: "file_ta", Filename: "chart.png", MimeType: "image/png", Content: []byte("\x89PNG ta's chart")},
		upstreamtest.File{ID: "file_tb", Filename: "tb.csv", MimeType: "text/csv", Content: []byte("tb,secret")})
	mux.Handle("/v1/files", files)
	mux.Handle("/v1/files/", files)
	up := upstreamtest.New(t, mux)
	gw := serveTwoTenants(t, up.Addr())
	owner, other := caller{"key-a", "ann"}, caller{"key-b", "ann"}
	run := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Plot it."}],"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`
	if status, b := postJSON(t, gw+"/v1/messages", run, anthropicHeaders(owner)); status != http.StatusOK {
		t.Fatalf("the code run as %v: %d %s", owner, status, b)
	}

	if status, b := send(t, http.MethodGet, gw+"/v1/files/file_ta/content", "", anthropicHeaders(owner)); status != http.StatusOK || b != "\x89PNG ta's chart" {
		t.Fatalf("the owner's download: %d %q", status, b)
	}
	last := up.Last(t)
	if last.Path != "/v1/files/file_ta/content" || last.Header.Get("X-Api-Key") != "sk-ant-operator" || last.Header.Get("Authorization") != "" ||
		last.Header.Get("Anthropic-Beta") != upstreamtest.FilesBeta {
		t.Errorf("the provider got %s with %v", last.Path, last.Header)
	}
	if status, b := send(t, http.MethodGet, gw+"/v1/files/file_ta", "", anthropicHeaders(owner)); status != http.StatusOK || !strings.Contains(b, `"filename":"chart.png"`) {
		t.Fatalf("the owner's metadata: %d %s", status, b)
	}

	for _, tt := range []struct {
		who        caller
		path       string
		status     int
		typ, words string
	}{
		{other, "/v1/files/file_ta/content", http.StatusNotFound, "not_found_error", "File with id 'file_ta' not found."},
		{other, "/v1/files/file_ta", http.StatusNotFound, "not_found_error", "File with id 'file_ta' not found."},
		{owner, "/v1/files/file_tb/content", http.StatusNotFound, "not_found_error", "File with id 'file_tb' not found."},
		{owner, "/v1/files/file_never", http.StatusNotFound, "not_found_error", "File with id 'file_never' not found."},
		{owner, "/v1/files", http.StatusForbidden, "permission_error", "does not list files"},
	} {
		// Only the Files API's requests count: the first turn's enrichment
		// may call the provider's Messages API meanwhile.
		filesCalls := func() int {
			n := 0
			for _, r := range up.Requests() {
				if strings.HasPrefix(r.Path, "/v1/files") {
					n++
				}
			}
			return n
		}
		before := filesCalls()
		status, b := send(t, http.MethodGet, gw+tt.path, "", anthropicHeaders(tt.who))
		if status != tt.status || anthropicError(b) != tt.typ || !strings.Contains(b, tt.words) {
			t.Errorf("GET %s as %v: %d %s, want %d %s", tt.path, tt.who, status, b, tt.status, tt.typ)
		}
		if n := filesCalls() - before; n != 0 {
			t.Errorf("GET %s as %v: the provider got %d requests, want none", tt.path, tt.who, n)
		}
	}
}

// TestAnthropicEdgeEndToEnd: on the routes no API owns, the failed-key
// limiter's 429 (Retry-After kept) and the browser guard's refusal answer
// an Anthropic client (anthropic-version) in Anthropic's shape, and an
// OpenAI client in OpenAI's, as before. Run end to end: the real
// `gateway serve`.
func TestAnthropicEdgeEndToEnd(t *testing.T) {
	up := upstreamtest.New(t, nil)
	vars := func() map[string]string {
		return map[string]string{"GATEWAY_UPSTREAM_BASE_URL": up.URL(), "GATEWAY_ANTHROPIC_BASE_URL": up.URL()}
	}
	keyed := serveConfigured(t, "keys:\n  - hash: "+identity.HashKey("key-a")+"\n    tenant: ta\n"+
		"security:\n  failed_auth_burst: 2\n  failed_auth_refill: 1h\ncompaction:\n  enabled: false\n", vars())
	claude := map[string]string{"Authorization": "Bearer guess", "Anthropic-Version": "2023-06-01"}
	for i := range 2 {
		if status, b := send(t, http.MethodGet, keyed+"/v1/models", "", claude); status != http.StatusUnauthorized || anthropicError(b) != "authentication_error" {
			t.Fatalf("guess %d: %d %s", i, status, b)
		}
	}
	for _, anthropic := range []bool{true, false} {
		req, _ := http.NewRequest(http.MethodGet, keyed+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer key-a")
		if anthropic {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		b := string(raw)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("limited, anthropic %v: %d Retry-After %q: %s", anthropic, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		if typ := anthropicError(b); anthropic != (typ == "rate_limit_error") || !anthropic && !strings.Contains(b, `"code":"too_many_failed_attempts"`) {
			t.Errorf("limited, anthropic %v: %s", anthropic, b)
		}
	}

	open := serveConfigured(t, "compaction:\n  enabled: false\n", vars())
	for _, anthropic := range []bool{true, false} {
		h := map[string]string{"Host": "attacker.example:8080"}
		if anthropic {
			h["Anthropic-Version"] = "2023-06-01"
		}
		status, b := send(t, http.MethodGet, open+"/v1/models", "", h)
		if typ := anthropicError(b); status != http.StatusForbidden || anthropic != (typ == "permission_error") ||
			!anthropic && !strings.Contains(b, `"code":"host_not_allowed"`) {
			t.Errorf("rebinding, anthropic %v: %d %s", anthropic, status, b)
		}
	}
	if up.Calls() != 0 {
		t.Errorf("refused requests reached the provider %d times", up.Calls())
	}
}
