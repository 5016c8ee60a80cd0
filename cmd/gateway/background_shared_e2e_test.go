package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// bgProvider is a fake provider of one background response, resp_bg,
// in_progress until done is set.
type bgProvider struct {
	*upstreamtest.Server
	mu     sync.Mutex
	status string
}

func newBGProvider(t *testing.T) *bgProvider {
	p := &bgProvider{status: "in_progress"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(bgWire("resp_bg", "queued")))
	})
	mux.HandleFunc("GET /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		s := p.status
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(bgWire(r.PathValue("id"), s)))
	})
	mux.Handle("POST /v1/chat/completions", upstreamtest.Chat(upstreamtest.Reply{Content: "You are welcome."}))
	p.Server = upstreamtest.New(t, mux)
	return p
}

func (p *bgProvider) set(status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = status
}

func (p *bgProvider) done() { p.set("completed") }

// bgSecret is a secret the background request carries: held redacted.
var bgSecret = "sk-" + "proj-" + strings.Repeat("Zq9_", 12)

// postBackground sends a background request of h's user to gw.
func postBackground(t *testing.T, gw string, h map[string]string) {
	t.Helper()
	res := sendBody(t, gw+"/v1/responses", h, map[string]any{"model": "o3", "input": "Where is Porto? My key is " + bgSecret, "background": true})
	if res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"queued"`) || res.Header.Get("X-Memory-Degraded") != "" {
		t.Fatalf("POST: %d, degraded %q: %s", res.Status, res.Header.Get("X-Memory-Degraded"), res.Body)
	}
}

// getResponse GETs resp_bg from gw with headers h.
func getResponse(t *testing.T, gw string, h map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gw+"/v1/responses/resp_bg", nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET: %d", resp.StatusCode)
	}
}

// wantBackgroundStored checks the conversation holds the background
// turn, with its answer, once, its secret redacted.
func wantBackgroundStored(t *testing.T, g *testGateway, id memory.Identity) {
	t.Helper()
	msgs := waitStored(t, g, id, 2)
	if !strings.HasPrefix(msgs[0].Content, "Where is Porto?") || strings.Contains(msgs[0].Content, bgSecret) ||
		msgs[1].Role != "assistant" || msgs[1].Content != "Porto is in Portugal." {
		t.Errorf("stored %q (%s), %q (%s)", msgs[0].Content, msgs[0].Role, msgs[1].Content, msgs[1].Role)
	}
}

// TestBackgroundResponseStoredByAnyGateway: two gateways share one
// PostgreSQL and Redis. A background request answered queued by A is
// held in the store, its secret redacted there; when the response is
// done, GETs on B at once store its turn once, and a GET on A nothing
// more (concurrent claims across processes: storetest.RunHeld's
// ClaimedOnceAtOnce).
func TestBackgroundResponseStoredByAnyGateway(t *testing.T) {
	up := newBGProvider(t)
	cfg := storeConfigs(t, up.Server)["postgres+redis"](t)
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "bg-shared", "X-Memory-Conversation": "bg"}
	postBackground(t, a.URL, h)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cfg.Store.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	var held [][]byte
	rows, err := conn.Query(ctx, `SELECT exchange FROM held_responses`)
	if err != nil {
		t.Fatal(err)
	}
	if held, err = pgx.CollectRows(rows, pgx.RowTo[[]byte]); err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || bytes.Contains(held[0], []byte(bgSecret)) || bytes.Contains(held[0], []byte("resp_bg")) {
		t.Fatalf("held %d rows (secret or response id in the clear: %v); want 1, neither", len(held), len(held) == 1 && (bytes.Contains(held[0], []byte(bgSecret)) || bytes.Contains(held[0], []byte("resp_bg"))))
	}

	up.done()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { getResponse(t, b.URL, h) })
	}
	wg.Wait()
	id := memory.Identity{Tenant: memory.DefaultTenant, User: "bg-shared", Conversation: "bg"}
	wantBackgroundStored(t, b, id)
	// A's GET, and a later turn of the conversation, stored after it:
	// the background turn was stored once.
	getResponse(t, a.URL, h)
	res := sendBody(t, b.URL+"/v1/chat/completions", h, map[string]any{"model": "gpt-4o-mini", "messages": []any{user("thanks")}})
	if res.Status != http.StatusOK {
		t.Fatalf("later turn: %d %s", res.Status, res.Body)
	}
	waitStored(t, a, id, 4)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM held_responses`).Scan(&left); err != nil || left != 0 {
		t.Errorf("held rows left: %d (%v), want 0", left, err)
	}
}

// TestBackgroundResponseSurvivesARestart: on the embedded store, a
// background request answered queued before the gateway restarts is
// stored by a GET after it; a GET naming no user completes it for the
// user the POST named in its body.
func TestBackgroundResponseSurvivesARestart(t *testing.T) {
	up := newBGProvider(t)
	cfg := storeConfigs(t, up.Server)["sqlite"](t)
	g := startGateway(t, cfg)
	res := sendBody(t, g.URL+"/v1/responses", map[string]string{"Authorization": "Bearer sk-test"},
		map[string]any{"model": "o3", "input": "Where is Porto? My key is " + bgSecret, "background": true, "user": "bg-restart"})
	if res.Status != http.StatusOK || res.Header.Get("X-Memory-Degraded") != "" {
		t.Fatalf("POST: %d, degraded %q: %s", res.Status, res.Header.Get("X-Memory-Degraded"), res.Body)
	}
	g.stop()

	g = startGateway(t, cfg)
	up.done()
	getResponse(t, g.URL, map[string]string{"Authorization": "Bearer sk-test"})
	convs, err := g.mem.store.Conversations(context.Background(), memory.DefaultTenant, "bg-restart")
	if err != nil || len(convs) != 1 {
		t.Fatalf("conversations after the GET: %+v, %v; want one", convs, err)
	}
	wantBackgroundStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: "bg-restart", Conversation: convs[0].ID})
}

// TestBackgroundResponseErasedBeforeItsAnswer: on both stores, a user
// erased between the background request and the GET that returns it
// done has nothing stored: the held exchange went with the erasure.
func TestBackgroundResponseErasedBeforeItsAnswer(t *testing.T) {
	up := newBGProvider(t)
	for name, mk := range storeConfigs(t, up.Server) {
		t.Run(name, func(t *testing.T) {
			up.set("in_progress")
			g := startGateway(t, mk(t))
			h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "bg-erased", "X-Memory-Conversation": "bg"}
			postBackground(t, g.URL, h)
			req, _ := http.NewRequest(http.MethodDelete, g.URL+"/v1/memory/users/bg-erased", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("erasure: %d", resp.StatusCode)
			}
			up.done()
			getResponse(t, g.URL, h)
			// A turn of the user's after the erasure is stored; nothing of
			// the background one before it.
			res := sendBody(t, g.URL+"/v1/chat/completions", h, map[string]any{"model": "gpt-4o-mini", "messages": []any{user("hello again")}})
			if res.Status != http.StatusOK {
				t.Fatalf("later turn: %d %s", res.Status, res.Body)
			}
			msgs := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: "bg-erased", Conversation: "bg"}, 2)
			if msgs[0].Content != "hello again" {
				t.Errorf("stored %q first, want the turn after the erasure", msgs[0].Content)
			}
		})
	}
}
