package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// logSink collects run's log lines and reports the address of the
// "listening" line.
type logSink struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	for _, line := range bytes.Split(p, []byte("\n")) {
		var l struct{ Msg, Addr string }
		if json.Unmarshal(line, &l) == nil && l.Msg == "listening" {
			s.addr <- l.Addr
		}
	}
	return len(p), nil
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// env returns a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// mustServe runs `gateway serve` in-process on a free port in front of up,
// with a SQLite store in a temporary directory (see mustServeEnv).
func mustServe(t *testing.T, up *upstreamtest.Server) (string, *logSink) {
	t.Helper()
	return mustServeEnv(t, map[string]string{
		"GATEWAY_UPSTREAM_BASE_URL": up.URL(),
		"GATEWAY_SQLITE_PATH":       filepath.Join(t.TempDir(), "memgate.db"),
	})
}

// mustServeEnv runs `gateway serve` in-process with vars (plus a free
// loopback port) and returns its base URL once /healthz answers (start-up
// may take a minute on a loaded 2-core CI machine: migrations, the encoder);
// the server stops, and its run error is checked, when the test ends.
func mustServeEnv(t *testing.T, vars map[string]string) (string, *logSink) {
	t.Helper()
	logs := &logSink{addr: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	vars["GATEWAY_LISTEN"] = "127.0.0.1:0"
	go func() {
		done <- run(ctx, []string{"gateway", "serve"}, env(vars), strings.NewReader(""), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return after cancel")
		}
	})
	var addr string
	select {
	case addr = <-logs.addr:
	case err := <-done:
		t.Fatalf("run returned early: %v\n%s", err, logs)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no listening line:\n%s", logs)
	}
	url := "http://" + addr
	eventually(t, "/healthz", func() bool {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, logs
}

// serveOnStore runs `gateway serve` with vars on store ("sqlite", or
// "postgres+redis": a database and a Redis prefix of the test's own),
// with 10s to load memory and embed a query, and returns its base URL.
func serveOnStore(t *testing.T, store string, vars map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := "memory:\n  load_timeout: 10s\n  embedding_timeout: 10s\n"
	if store == "postgres+redis" {
		cfg += "store:\n  driver: postgres\n  postgres_url: " + strconv.Quote(testenv.PostgresURL(t)) +
			"\n  redis_url: " + strconv.Quote(testenv.RedisURL(t)) + "\n  redis_prefix: " + strconv.Quote(testenv.RedisPrefix(t)) + "\n"
	} else {
		cfg += "store:\n  sqlite_path: " + strconv.Quote(filepath.Join(dir, "memgate.db")) + "\n"
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	vars["GATEWAY_CONFIG"] = path
	base, _ := mustServeEnv(t, vars)
	return base
}

// serveConfigured runs `gateway serve` as mustServeEnv does, on SQLite in
// a temp dir, with config as its config file and vars, and returns its
// base URL.
func serveConfigured(t *testing.T, config string, vars map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "memgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	vars["GATEWAY_CONFIG"] = cfgPath
	vars["GATEWAY_SQLITE_PATH"] = filepath.Join(dir, "memgate.db")
	url, _ := mustServeEnv(t, vars)
	return url
}

func TestServeEndToEnd(t *testing.T) {
	up := upstreamtest.New(t, nil)
	url, logs := mustServe(t, up)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"x_extra":{"a":1}}`
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-client-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != string(upstreamtest.Completion("gpt-4o-mini", upstreamtest.DefaultReply)) {
		t.Fatalf("status %d body %s", resp.StatusCode, got)
	}
	if sent := up.Last(t); string(sent.Body) != body || sent.Header.Get("Authorization") != "Bearer sk-client-secret" {
		t.Errorf("upstream got %s with Authorization %q", sent.Body, sent.Header.Get("Authorization"))
	}
	for _, path := range []string{"/readyz", "/metrics"} {
		resp, err := http.Get(url + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", path, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
	if strings.Contains(logs.String(), "sk-client-secret") {
		t.Error("logs contain the client's key")
	}
}

func TestRunCommands(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		stdin   string
		getenv  map[string]string
		want    string
		wantErr string
	}{
		{"version", []string{"gateway", "version"}, "", nil, "memgate ", ""},
		{"hash-key argument", []string{"gateway", "hash-key", "gw-secret"}, "", nil, identity.HashKey("gw-secret") + "\n", ""},
		{"hash-key stdin", []string{"gateway", "hash-key"}, "gw-secret\n", nil, identity.HashKey("gw-secret") + "\n", ""},
		{"hash-key empty", []string{"gateway", "hash-key"}, "", nil, "", "empty key"},
		{"unknown command", []string{"gateway", "frobnicate"}, "", nil, "", `unknown command "frobnicate"`},
		{"bad config", []string{"gateway", "serve"}, "", map[string]string{"GATEWAY_LOG_LEVEL": "loud"}, "", "log_level"},
		{"bad upstream", []string{"gateway"}, "", map[string]string{"GATEWAY_UPSTREAM_BASE_URL": "ftp://x"}, "", "upstream.base_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, env(tt.getenv), strings.NewReader(tt.stdin), &out, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tt.want) {
				t.Errorf("output %q, want prefix %q", out.String(), tt.want)
			}
		})
	}
}
