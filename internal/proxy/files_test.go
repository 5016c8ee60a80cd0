package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// filesUpstream is a fake Anthropic API: its Messages replies' code
// execution writes file_bob (anthropicFileReply), its Files API holds
// file_bob and file_eve (another tenant's, written under the same
// operator key).
func filesUpstream(t *testing.T, files ...upstreamtest.File) *upstreamtest.Server {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/messages", upstreamtest.JSON(http.StatusOK, anthropicFileReply("")))
	fs := upstreamtest.NewFiles(append([]upstreamtest.File{
		{ID: "file_bob", Filename: "chart.png", MimeType: "image/png", Content: []byte("\x89PNG bob's chart")},
		{ID: "file_eve", Filename: "secret.csv", MimeType: "text/csv", Content: []byte("eve,secret")},
	}, files...)...)
	mux.Handle("/v1/files", fs)
	mux.Handle("/v1/files/", fs)
	return upstreamtest.New(t, mux)
}

// fileRequest is an Anthropic SDK's Files API request as user, under the
// gateway key.
func fileRequest(t *testing.T, g *gateway, method, path, user string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, g.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer gw-key")
	req.Header.Set("X-Memory-User", user)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", upstreamtest.FilesBeta)
	return req
}

// uploadRequest is fileRequest's upload of a file named name holding
// content.
func uploadRequest(t *testing.T, g *gateway, user, name string, content []byte) *http.Request {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content)
	mw.Close()
	req := fileRequest(t, g, http.MethodPost, "/v1/files", user)
	req.Body, req.ContentLength = io.NopCloser(&body), int64(body.Len())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return req
}

// TestAnthropicFilesOfTheCaller: with gateway keys and the operator's
// Anthropic key, an Anthropic client reaches the Files API for the files
// bound to its tenant and user — a file its code execution wrote, one it
// uploaded (bound as the upload's reply names it): their metadata, their
// content, their deletion go to the Anthropic upstream with the
// operator's key and the client's anthropic-beta, without any
// passthrough rule. Another's file, or an id never given out, is a 404
// in Anthropic's shape that never reaches the provider; the list, which
// holds every tenant's files, is refused. A path not in clean form is
// no file route. A file's content comes byte for byte, whatever its type.
func TestAnthropicFilesOfTheCaller(t *testing.T) {
	// A file whose bytes look like a provider's error event naming an
	// account: a download is the file, not a stream to scrub.
	const events = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"org-abcdef123456 sk-ant-0123456789\"}}\n\n"
	up := filesUpstream(t, upstreamtest.File{ID: "file_log", Filename: "log.sse", MimeType: "text/event-stream", Content: []byte(events)})
	states := newFakeStates()
	states.owner[memory.ProviderState{Kind: memory.StateFile, ID: "file_log"}] = "a/bob"
	g := anthropicGateway(t, up, states)
	run := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Plot it."}],"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`
	if resp, b := g.post(t, "/v1/messages", run, map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob", "Anthropic-Version": "2023-06-01"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("the code run: %d %s", resp.StatusCode, b)
	}
	mustOwn(t, states, memory.ProviderState{Kind: memory.StateFile, ID: "file_bob"}, "a/bob")

	// The owner's file: metadata and content, as the provider gives them.
	resp, b := do(t, fileRequest(t, g, http.MethodGet, "/v1/files/file_bob", "bob"))
	var meta struct{ Type, ID, Filename string }
	if err := json.Unmarshal(b, &meta); resp.StatusCode != http.StatusOK || err != nil || meta.Type != "file" || meta.ID != "file_bob" || meta.Filename != "chart.png" {
		t.Fatalf("the owner's metadata: %d %s", resp.StatusCode, b)
	}
	last := up.Last(t)
	if last.Path != "/v1/files/file_bob" || last.Header.Get("X-Api-Key") != "sk-ant-operator" || last.Header.Get("Authorization") != "" ||
		last.Header.Get("Anthropic-Beta") != upstreamtest.FilesBeta || last.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("the provider got %s with %v", last.Path, last.Header)
	}
	resp, b = do(t, fileRequest(t, g, http.MethodGet, "/v1/files/file_bob/content", "bob"))
	if resp.StatusCode != http.StatusOK || string(b) != "\x89PNG bob's chart" || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("the owner's download: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}

	if resp, b = do(t, fileRequest(t, g, http.MethodGet, "/v1/files/file_log/content", "bob")); resp.StatusCode != http.StatusOK || string(b) != events {
		t.Fatalf("the owner's event-stream file: %d %q, want %q", resp.StatusCode, b, events)
	}

	// An upload is its uploader's.
	resp, b = do(t, uploadRequest(t, g, "bob", "notes.txt", []byte("bob's notes")))
	var up1 struct{ ID string }
	if err := json.Unmarshal(b, &up1); resp.StatusCode != http.StatusOK || err != nil || up1.ID == "" {
		t.Fatalf("the upload: %d %s", resp.StatusCode, b)
	}
	mustOwn(t, states, memory.ProviderState{Kind: memory.StateFile, ID: up1.ID}, "a/bob")
	if resp, b = do(t, fileRequest(t, g, http.MethodGet, "/v1/files/"+up1.ID+"/content", "bob")); resp.StatusCode != http.StatusOK || string(b) != "bob's notes" {
		t.Fatalf("the uploaded file's download: %d %s", resp.StatusCode, b)
	}

	// Refused without reaching the provider.
	for _, tt := range []struct {
		method, path, user string
		status             int
		typ, want          string
	}{
		{http.MethodGet, "/v1/files/file_bob", "eve", 404, "not_found_error", "File with id 'file_bob' not found."},
		{http.MethodGet, "/v1/files/file_bob/content", "eve", 404, "not_found_error", "File with id 'file_bob' not found."},
		{http.MethodDelete, "/v1/files/file_bob", "eve", 404, "not_found_error", "File with id 'file_bob' not found."},
		{http.MethodGet, "/v1/files/" + up1.ID + "/content", "eve", 404, "not_found_error", "File with id '" + up1.ID + "' not found."},
		{http.MethodGet, "/v1/files/file_eve/content", "bob", 404, "not_found_error", "File with id 'file_eve' not found."},
		{http.MethodGet, "/v1/files/file_never", "bob", 404, "not_found_error", "File with id 'file_never' not found."},
		{http.MethodGet, "/v1/files", "bob", 403, "permission_error", "does not list files"},
		{http.MethodGet, "/v1/files?limit=1000", "bob", 403, "permission_error", "does not list files"},
		{http.MethodGet, "/v1/files/file_bob/content/x", "bob", 403, "permission_error", "does not forward"},
		{http.MethodGet, "/v1/files/file_bob%2F..%2Ffile_eve/content", "bob", 403, "permission_error", "does not forward"},
		{http.MethodGet, "/v1/files/file_bob/", "bob", 403, "permission_error", "does not forward"},
		{http.MethodPut, "/v1/files/file_bob", "bob", 403, "permission_error", "does not forward"},
	} {
		before := up.Calls()
		resp, b := do(t, fileRequest(t, g, tt.method, tt.path, tt.user))
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s as %s: %d %s, want %d", tt.method, tt.path, tt.user, resp.StatusCode, b, tt.status)
			continue
		}
		if typ, msg := anthropicErrorBody(t, b); typ != tt.typ || !strings.Contains(msg, tt.want) {
			t.Errorf("%s %s as %s: %s %q, want %s %q", tt.method, tt.path, tt.user, typ, msg, tt.typ, tt.want)
		}
		if resp.Header.Get("Request-Id") == "" {
			t.Errorf("%s %s as %s: no request-id", tt.method, tt.path, tt.user)
		}
		if up.Calls() != before {
			t.Errorf("%s %s as %s reached the provider", tt.method, tt.path, tt.user)
		}
	}

	// The owner deletes its file.
	if resp, b = do(t, fileRequest(t, g, http.MethodDelete, "/v1/files/file_bob", "bob")); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"file_deleted"`) {
		t.Fatalf("the owner's delete: %d %s", resp.StatusCode, b)
	}

	// An OpenAI client's Files API request is the OpenAI one's, refused
	// as before.
	req := fileRequest(t, g, http.MethodGet, "/v1/files/file_eve/content", "bob")
	req.Header.Del("Anthropic-Version")
	before := up.Calls()
	resp, b = do(t, req)
	if _, code, _ := apiErrorBody(t, b); resp.StatusCode != http.StatusForbidden || code != "route_not_allowed" || up.Calls() != before {
		t.Errorf("an OpenAI client's download: %d %s", resp.StatusCode, b)
	}
}

// TestAnthropicFileDownloadStreams: a download goes to the client as the
// provider sends it, not held whole first: the provider sends the rest of
// a large file only once the client read its first part.
func TestAnthropicFileDownloadStreams(t *testing.T) {
	const rest = 32 << 20
	first := []byte("first part of a large file\n")
	read := make(chan struct{})
	up := filesUpstream(t, upstreamtest.File{ID: "file_big", Filename: "big.bin", MimeType: "application/octet-stream", Size: int64(len(first)) + rest,
		Body: func(w http.ResponseWriter) {
			w.Write(first)
			http.NewResponseController(w).Flush()
			select {
			case <-read:
			case <-time.After(30 * time.Second):
				return // never read: the body ends short
			}
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for range rest / len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}})
	states := newFakeStates()
	states.owner[memory.ProviderState{Kind: memory.StateFile, ID: "file_big"}] = "a/bob"
	g := anthropicGateway(t, up, states)
	resp, err := http.DefaultClient.Do(fileRequest(t, g, http.MethodGet, "/v1/files/file_big/content", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("first part %q: %v", got, err)
	}
	close(read)
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != rest {
		t.Fatalf("the rest: %d bytes, %v; want %d", n, err, rest)
	}
}

// TestEdgeAnthropicShape: on the routes no API owns (/v1/models,
// /v1/files, …), the failed-key limiter's 429 (with Retry-After) and the
// browser guard's refusals answer an Anthropic client (anthropic-version)
// in Anthropic's shape, with request-id, and any other client in
// OpenAI's as before; neither reaches a provider.
func TestEdgeAnthropicShape(t *testing.T) {
	for _, anthropic := range []bool{false, true} {
		t.Run(map[bool]string{false: "openai", true: "anthropic"}[anthropic], func(t *testing.T) {
			send := func(g *gateway, path, key, host string) (*http.Response, []byte) {
				req, _ := http.NewRequest(http.MethodGet, g.URL+path, nil)
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				if host != "" {
					req.Host = host
				}
				if anthropic {
					req.Header.Set("Anthropic-Version", "2023-06-01")
				}
				return do(t, req)
			}
			check := func(what string, resp *http.Response, b []byte, status int, typ, code string) {
				t.Helper()
				if resp.StatusCode != status {
					t.Fatalf("%s: %d %s, want %d", what, resp.StatusCode, b, status)
				}
				if anthropic {
					if got, _ := anthropicErrorBody(t, b); got != typ || resp.Header.Get("Request-Id") == "" {
						t.Errorf("%s: %s (request-id %q), want an Anthropic %s", what, b, resp.Header.Get("Request-Id"), typ)
					}
					return
				}
				if _, got, _ := apiErrorBody(t, b); got != code {
					t.Errorf("%s: code %q, want %q: %s", what, got, code, b)
				}
			}
			up := upstreamtest.New(t, nil)
			clock := time.Unix(1_700_000_000, 0)
			lim := server.NewFailureLimiter(2, time.Minute, 100, func() time.Time { return clock })
			keyed := identity.New([]identity.Key{{Hash: identity.HashKey("good"), Tenant: "a"}})
			g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() }, Deps{Resolver: keyed, Limiter: lim, States: newFakeStates()})
			for i := range 2 {
				if resp, b := send(g, "/v1/models", "guess", ""); resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("guess %d: %d %s", i, resp.StatusCode, b)
				}
			}
			for _, path := range []string{"/v1/models", "/v1/files/file_x/content"} {
				resp, b := send(g, path, "good", "")
				check("limited "+path, resp, b, http.StatusTooManyRequests, "rate_limit_error", "too_many_failed_attempts")
				if resp.Header.Get("Retry-After") != "60" {
					t.Errorf("limited %s: Retry-After %q", path, resp.Header.Get("Retry-After"))
				}
			}

			open := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() },
				Deps{Resolver: identity.New(nil), Browser: server.NewBrowserGuard("127.0.0.1:8080", nil, nil)})
			for _, path := range []string{"/v1/models", "/v1/files"} {
				resp, b := send(open, path, "", "attacker.example")
				check("rebinding "+path, resp, b, http.StatusForbidden, "permission_error", "host_not_allowed")
			}
			if up.Calls() != 0 {
				t.Errorf("refused requests reached the provider %d times", up.Calls())
			}
		})
	}
}
