package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// viaProxy rewrites a service URL to go through p.
func viaProxy(t *testing.T, raw string, p *faultProxy) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// metricLines scrapes /metrics and returns its lines.
func metricLines(t *testing.T, base string) []string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Split(string(b), "\n")
}

// metricValue scrapes /metrics for the first sample line starting with name.
func metricValue(t *testing.T, base, name string) string {
	t.Helper()
	for _, line := range metricLines(t, base) {
		if strings.HasPrefix(line, name) {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	return ""
}

// TestRedisDownMidRun: with Redis cut between turns, chat requests still
// succeed and every turn is stored exactly once (captured directly to
// PostgreSQL while Redis is away).
func TestRedisDownMidRun(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["postgres+redis"](t)
	rp := mustFaultProxy(t, hostOf(t, cfg.Store.RedisURL))
	cfg.Store.RedisURL = viaProxy(t, cfg.Store.RedisURL, rp)
	g := startGateway(t, cfg)
	id := memory.Identity{Tenant: memory.DefaultTenant, User: "dave", Conversation: "redis-fault"}
	h := map[string]string{"X-Memory-User": "dave", "X-Memory-Conversation": "redis-fault"}
	for i := range 6 {
		switch i {
		case 2:
			rp.Cut()
		case 4:
			rp.Restore()
		}
		r := chat(t, g.URL, h, i%2 == 1, user(fmt.Sprintf("turn %d", i)))
		if r.Status != http.StatusOK {
			t.Fatalf("turn %d: status %d: %s", i, r.Status, r.Body)
		}
		msgs := waitStored(t, g, id, 2*(i+1))
		if got := msgs[len(msgs)-2].Content; got != fmt.Sprintf("turn %d", i) {
			t.Fatalf("turn %d stored as %q", i, got)
		}
	}
	// Nothing duplicated later by a redelivery either.
	time.Sleep(200 * time.Millisecond)
	waitStored(t, g, id, 12)
}

// TestPostgresDownDegradesAndCapturesLater: with PostgreSQL unreachable,
// chat requests still succeed as a plain proxy marked X-Memory-Degraded and
// counted; the captures queued meanwhile are stored once it returns.
func TestPostgresDownDegradesAndCapturesLater(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["postgres+redis"](t)
	pp := mustFaultProxy(t, hostOf(t, cfg.Store.PostgresURL))
	cfg.Store.PostgresURL = viaProxy(t, cfg.Store.PostgresURL, pp)
	cfg.Capture.ReclaimAfter = config.Duration(500 * time.Millisecond)
	cfg.Memory.LoadTimeout = config.Duration(2 * time.Second)
	g := startGateway(t, cfg)

	id := memory.Identity{Tenant: memory.DefaultTenant, User: "erin", Conversation: "pg-fault"}
	h := map[string]string{"X-Memory-User": "erin", "X-Memory-Conversation": "pg-fault"}
	if r := chat(t, g.URL, h, false, user("before the outage")); r.Status != 200 || r.Header.Get("X-Memory-Degraded") != "" {
		t.Fatalf("status %d degraded %q", r.Status, r.Header.Get("X-Memory-Degraded"))
	}
	waitStored(t, g, id, 2)

	pp.Cut()
	for i := range 2 {
		r := chat(t, g.URL, map[string]string{"X-Memory-User": "erin", "X-Memory-Conversation": fmt.Sprintf("outage-%d", i)}, i == 1, user(fmt.Sprintf("during the outage %d", i)))
		if r.Status != http.StatusOK {
			t.Fatalf("during outage: status %d: %s", r.Status, r.Body)
		}
		// Every part lives in the store: every part is named.
		if d := r.Header.Get("X-Memory-Degraded"); !strings.Contains(d, "history") || !strings.Contains(d, "summary") {
			t.Fatalf("during outage: X-Memory-Degraded = %q", r.Header.Get("X-Memory-Degraded"))
		}
	}
	if v := metricValue(t, g.URL, `memgate_memory_degraded_total{part="history"}`); v == "" || v == "0" {
		t.Fatalf("degraded metric = %q", v)
	}
	pp.Restore()
	for i := range 2 {
		msgs := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: "erin", Conversation: fmt.Sprintf("outage-%d", i)}, 2)
		if msgs[0].Content != fmt.Sprintf("during the outage %d", i) {
			t.Fatalf("stored %q", msgs[0].Content)
		}
	}
}

// TestIsolationAcrossTenants: two tenants with the same user and
// conversation ids never see, list or delete each other's data.
func TestIsolationAcrossTenants(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			for _, tenant := range []string{"acme", "globex"} {
				h := map[string]string{"X-Memory-Tenant": tenant, "X-Memory-User": "sam", "X-Memory-Conversation": "c"}
				if r := chat(t, g.URL, h, false, user("secret of "+tenant)); r.Status != 200 {
					t.Fatalf("status %d", r.Status)
				}
				waitStored(t, g, memory.Identity{Tenant: tenant, User: "sam", Conversation: "c"}, 2)
			}
			// Chat: globex's prompt carries only globex's history.
			chat(t, g.URL, map[string]string{"X-Memory-Tenant": "globex", "X-Memory-User": "sam", "X-Memory-Conversation": "c"}, false, user("what do you know?"))
			prompt := strings.Join(upstreamTexts(t, up), "\n")
			if strings.Contains(prompt, "acme") || !strings.Contains(prompt, "secret of globex") {
				t.Fatalf("globex prompt:\n%s", prompt)
			}
			// Management API.
			get := func(tenant, path string) (int, string) {
				return do(t, http.MethodGet, g.URL+path, map[string]string{"X-Memory-Tenant": tenant})
			}
			if st, body := get("acme", "/v1/memory/conversations/c?user=sam"); st != 200 || !strings.Contains(body, "secret of acme") || strings.Contains(body, "globex") {
				t.Fatalf("acme get: %d %s", st, body)
			}
			if st, body := get("initech", "/v1/memory/conversations/c?user=sam"); st != http.StatusNotFound {
				t.Fatalf("other tenant get: %d %s", st, body)
			}
			if st, body := get("initech", "/v1/memory/conversations?user=sam"); st != 200 || strings.Contains(body, `"id"`) {
				t.Fatalf("other tenant list: %d %s", st, body)
			}
			if st, _ := do(t, http.MethodDelete, g.URL+"/v1/memory/users/sam", map[string]string{"X-Memory-Tenant": "acme"}); st != 200 {
				t.Fatalf("delete user: %d", st)
			}
			if st, _ := get("acme", "/v1/memory/conversations/c?user=sam"); st != http.StatusNotFound {
				t.Fatalf("acme data survived its deletion: %d", st)
			}
			if st, body := get("globex", "/v1/memory/conversations/c?user=sam"); st != 200 || !strings.Contains(body, "secret of globex") {
				t.Fatalf("globex data lost by acme's deletion: %d %s", st, body)
			}
			if st, _ := do(t, http.MethodDelete, g.URL+"/v1/memory/conversations/c?user=sam", map[string]string{"X-Memory-Tenant": "acme"}); st != http.StatusNotFound {
				t.Fatalf("acme deleted globex's conversation: %d", st)
			}
			if st, _ := get("globex", "/v1/memory/conversations/c?user=sam"); st != 200 {
				t.Fatalf("globex conversation gone: %d", st)
			}
		})
	}
}

// do sends a request without a body and returns status and body.
func do(t *testing.T, method, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
