package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// get returns the status of GET url.
func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeStartsWithoutTheStore: PostgreSQL down at boot does not stop the
// gateway. It serves chat as a plain proxy marked X-Memory-Degraded: store,
// stays ready, reports the store on /healthz/store and memgate_store_up, and
// switches memory on once the store answers.
func TestServeStartsWithoutTheStore(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	pgURL := testenv.PostgresURL(t)
	pp := mustFaultProxy(t, hostOf(t, pgURL))
	pp.Cut()
	url, logs := mustServeEnv(t, map[string]string{
		"GATEWAY_UPSTREAM_BASE_URL": up.URL(),
		"GATEWAY_STORE":             "postgres",
		"GATEWAY_POSTGRES_URL":      viaProxy(t, pgURL, pp),
		"GATEWAY_SQLITE_PATH":       filepath.Join(t.TempDir(), "unused.db"),
	})
	h := map[string]string{"X-Memory-User": "erin", "X-Memory-Conversation": "boot"}
	r := chat(t, url, h, false, user("hello while the store is down"))
	if r.Status != http.StatusOK || r.Header.Get("X-Memory-Degraded") != "store" {
		t.Fatalf("status %d, X-Memory-Degraded %q: %s", r.Status, r.Header.Get("X-Memory-Degraded"), r.Body)
	}
	if s := getStatus(t, url+"/readyz"); s != http.StatusOK {
		t.Fatalf("/readyz = %d while chat is served", s)
	}
	if s := getStatus(t, url+"/healthz/store"); s != http.StatusServiceUnavailable {
		t.Fatalf("/healthz/store = %d with the store down", s)
	}
	if v := metricValue(t, url, "memgate_store_up"); v != "0" {
		t.Fatalf("memgate_store_up = %q, want 0", v)
	}
	if s := getStatus(t, url+"/v1/memory/conversations?user=erin"); s != http.StatusServiceUnavailable {
		t.Fatalf("management API = %d without the store, want 503", s)
	}

	pp.Restore()
	deadline := time.Now().Add(60 * time.Second)
	for getStatus(t, url+"/healthz/store") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("memory never switched on:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The pool's first connections are opened by the first requests, which
	// may find parts late on a loaded machine: wait for one served whole.
	for i := 0; ; i++ {
		r = chat(t, url, h, false, user(fmt.Sprintf("and now with memory %d", i)))
		d := r.Header.Get("X-Memory-Degraded")
		if r.Status != http.StatusOK || d == "store" {
			t.Fatalf("after reconnect: status %d, X-Memory-Degraded %q\n%s", r.Status, d, logs)
		}
		if d == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory never served whole after reconnect (last: %q)\n%s", d, logs)
		}
	}
	if v := metricValue(t, url, "memgate_store_up"); v != "1" {
		t.Fatalf("memgate_store_up = %q, want 1", v)
	}
	if v := metricValue(t, url, "memgate_capture_dropped_store_down_total"); v != "1" {
		t.Fatalf("captures dropped while down = %q, want 1", v)
	}
}
