package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

type preparerFunc func(ctx context.Context, req memory.Request) (memory.Prepared, error)

func (f preparerFunc) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	return f(ctx, req)
}

// Route leaves every request in its derived conversation.
func (f preparerFunc) Route(_ context.Context, id memory.Identity, _ []memory.Message, _ memory.Cut) memory.Routed {
	return memory.Routed{Conversation: id.Conversation}
}

// mustAdmin serves a with a server.Server until the test ends.
func mustAdmin(tb testing.TB, a *Admin) string {
	tb.Helper()
	srv, err := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	a.Register(srv)
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(hs.Close)
	return hs.URL
}

func post(tb testing.TB, url, body string, h map[string]string) (*http.Response, []byte) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const chat = `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What do I like?"}]}`

func TestPreview(t *testing.T) {
	note := json.RawMessage(`{"role":"system","content":"Memory: tea."}`)
	got := make(chan memory.Request, 1)
	prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
		got <- req
		return memory.Prepared{Messages: append([]json.RawMessage{note}, memory.Raws(req.Messages)...), TokensOriginal: 120, TokensSent: 80, OverBudget: true}, nil
	})
	url := mustAdmin(t, New(identity.New(nil), nil, nil, prep, 1<<20, 0, slog.New(slog.DiscardHandler)))
	resp, b := post(t, url+"/v1/memory/preview", chat, map[string]string{"X-Memory-User": "alice", "X-Memory-Budget": "500"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var p previewResponse
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 3 || p.TokensOriginal != 120 || p.TokensSent != 80 || !p.OverBudget || !memory.ValidID(p.Conversation) {
		t.Errorf("preview %s", b)
	}
	if req := <-got; req.User != "alice" || req.Budget != 500 || len(req.Messages) != 2 {
		t.Errorf("memory request %+v", req)
	}

	tests := []struct {
		name   string
		prep   Preparer
		header map[string]string
		body   string
		status int
	}{
		{"failing preparer", preparerFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
			return memory.Prepared{}, errors.New("store down")
		}), map[string]string{"X-Memory-User": "alice"}, chat, 503},
		{"no user", prep, nil, chat, 400},
		{"no memory configured", nil, map[string]string{"X-Memory-User": "alice"}, chat, 503},
		{"bad body", prep, map[string]string{"X-Memory-User": "alice"}, `{"messages":[`, 400},
		{"body too large", prep, map[string]string{"X-Memory-User": "alice"}, strings.Repeat(" ", 2<<20) + chat, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := mustAdmin(t, New(identity.New(nil), nil, nil, tt.prep, 1<<20, 0, slog.New(slog.DiscardHandler)))
			resp, b := post(t, url+"/v1/memory/preview", tt.body, tt.header)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			var e struct {
				Error struct{ Message, Type string }
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("not an OpenAI error body: %s", b)
			}
		})
	}
}

func TestUnconfiguredRoutesAnswer503(t *testing.T) {
	url := mustAdmin(t, New(nil, nil, nil, nil, 1<<20, 0, slog.New(slog.DiscardHandler)))
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/memory/conversations?user=alice"},
		{"DELETE", "/v1/memory/users/alice"},
		{"GET", "/v1/memory/users/alice/facts"},
		{"POST", "/v1/memory/search"},
	} {
		req, _ := http.NewRequest(tt.method, url+tt.path, strings.NewReader(`{}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Errorf("%s %s: status %d, want 503", tt.method, tt.path, resp.StatusCode)
		}
	}
}

// routingPreparer prepares nothing but the client's messages and routes
// every derived conversation to branch.
type routingPreparer struct {
	branch string
	got    chan memory.Request
}

func (p routingPreparer) Prepare(_ context.Context, req memory.Request) (memory.Prepared, error) {
	p.got <- req
	return memory.Prepared{Messages: memory.Raws(req.Messages)}, nil
}

func (p routingPreparer) Route(_ context.Context, id memory.Identity, _ []memory.Message, _ memory.Cut) memory.Routed {
	return memory.Routed{Conversation: p.branch, Root: id.Conversation}
}

// TestPreviewRoutesDerivedConversations: a preview of a request naming no
// conversation that resends its history shows the branch the chat routes
// would place it in; one carrying only its newest turn stays in default,
// and a named conversation is kept.
func TestPreviewRoutesDerivedConversations(t *testing.T) {
	const branch = "chat-0123456789abcdef0123456789abcdef"
	full := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"plan a trip"}]}`
	for _, tt := range []struct {
		name, body string
		header     map[string]string
		want       string
	}{
		{"derived", full, nil, branch},
		{"newest turn only", chat, nil, memory.DefaultConversation},
		{"named", full, map[string]string{"X-Memory-Conversation": "trip"}, "trip"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prep := routingPreparer{branch: branch, got: make(chan memory.Request, 1)}
			url := mustAdmin(t, New(identity.New(nil), nil, nil, prep, 1<<20, 0, slog.New(slog.DiscardHandler)))
			header := map[string]string{"X-Memory-User": "alice"}
			for k, v := range tt.header {
				header[k] = v
			}
			resp, b := post(t, url+"/v1/memory/preview", tt.body, header)
			var p previewResponse
			if resp.StatusCode != 200 || json.Unmarshal(b, &p) != nil {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if req := <-prep.got; p.Conversation != tt.want || req.Conversation != tt.want {
				t.Fatalf("preview in %q, prepared in %q; want %q", p.Conversation, req.Conversation, tt.want)
			}
		})
	}
}
