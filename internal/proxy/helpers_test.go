package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gateway is a proxy under test, served by a server.Server, in front of a
// fake upstream.
type gateway struct {
	URL  string
	p    *Proxy
	srv  *server.Server
	up   *upstreamtest.Server
	logs *syncBuffer
}

// gatewayConfig is what a test gateway is built from: the proxy's
// options, the server's shutdown grace and the gateway keys.
type gatewayConfig struct {
	Options
	ShutdownGrace time.Duration
	Keys          []identity.Key
}

// defaultConfig is the gateway's default configuration (internal/config's
// Default), as the wiring hands it to the proxy.
func defaultConfig() gatewayConfig {
	return gatewayConfig{
		Options: Options{
			Upstream: Upstream{
				BaseURL: "https://api.openai.com/v1", ConnectTimeout: 5 * time.Second, FirstByteTimeout: 120 * time.Second,
				IdleStreamTimeout: 60 * time.Second, MaxIdleConns: 1024, Retries: 2,
				RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: 5 * time.Second,
				Breaker:   Breaker{ConsecutiveFailures: 5, OpenTimeout: 30 * time.Second, HalfOpenRequests: 1},
				Anthropic: Anthropic{BaseURL: "https://api.anthropic.com/v1"},
			},
			MaxBodyBytes: 2 << 20,
			LoadTimeout:  150 * time.Millisecond,
			MaxHistory:   2000,
			Passthrough:  []string{"POST /v1/embeddings", "GET /v1/models", "GET /v1/models/*", "POST /v1/messages/count_tokens"},
		},
		ShutdownGrace: 30 * time.Second,
	}
}

// testConfig is the default configuration with fast retries, pointed at up.
func testConfig(up *upstreamtest.Server) gatewayConfig {
	cfg := defaultConfig()
	cfg.Upstream.BaseURL = up.URL()
	cfg.Upstream.RetryBaseDelay = time.Millisecond
	cfg.Upstream.RetryMaxDelay = 20 * time.Millisecond
	cfg.Upstream.FirstByteTimeout = 10 * time.Second
	cfg.ShutdownGrace = 5 * time.Second
	cfg.Upstream.IdleStreamTimeout = 5 * time.Second
	// The fake Preparers answer at once, but on a busy machine the
	// goroutine running one may wait past the default 150ms deadline for
	// a CPU, and the request would go upstream without memory. Tests of
	// that deadline set a short one themselves.
	cfg.LoadTimeout = 10 * time.Second
	return cfg
}

// newGateway builds a server with the proxy's routes for cfg, logging JSON
// at debug level to logs.
func newGateway(tb testing.TB, cfg gatewayConfig, deps Deps, ready func(context.Context) error, logs io.Writer) (*server.Server, *Proxy) {
	tb.Helper()
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	srv, err := server.New(reg, ready, cfg.ShutdownGrace, logger)
	if err != nil {
		tb.Fatalf("server.New: %v", err)
	}
	p, err := New(cfg.Options, deps, logger, reg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	p.Register(srv)
	tb.Cleanup(p.CloseIdleConnections)
	return srv, p
}

// mustGateway starts a proxy for up, with cfg adjusted by mutate, served by
// the server's Run on a loopback port until the test ends.
func mustGateway(tb testing.TB, up *upstreamtest.Server, mutate func(*gatewayConfig), deps Deps) *gateway {
	tb.Helper()
	cfg := testConfig(up)
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &syncBuffer{}
	srv, p := newGateway(tb, cfg, deps, nil, logs)
	url, _ := mustRun(tb, srv, p)
	return &gateway{URL: url, p: p, srv: srv, up: up, logs: logs}
}

// mustRun starts srv on a fresh port and returns its URL and a function that
// shuts it down and waits for Run to return and p's captures.
func mustRun(tb testing.TB, srv *server.Server, p *Proxy) (url string, stop func() error) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	var stopped bool
	stop = func() error {
		stopped = true
		cancel()
		err := wait(tb, done, "Run to return")
		p.Wait()
		return err
	}
	tb.Cleanup(func() {
		if !stopped {
			if err := stop(); err != nil {
				tb.Errorf("Run: %v", err)
			}
		}
	})
	return "http://" + ln.Addr().String(), stop
}

// post sends body to path with the given headers and returns the response
// and its whole body.
func (g *gateway) post(tb testing.TB, path, body string, header map[string]string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(tb, req)
}

func do(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	return resp, b
}

// metrics returns the gateway's /metrics text.
func (g *gateway) metrics(tb testing.TB) string {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/metrics", nil)
	_, b := do(tb, req)
	return string(b)
}

// waitMetric polls /metrics until it contains line.
func (g *gateway) waitMetric(tb testing.TB, line string) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := g.metrics(tb)
		if strings.Contains(m, line) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("metric %q not found in:\n%s", line, grepLines(m, "memgate_"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// apiErrorBody decodes an OpenAI-shaped error body, failing the test when it
// is not one.
func apiErrorBody(tb testing.TB, b []byte) (typ, code, param string) {
	tb.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		tb.Fatalf("not an OpenAI error body: %s", b)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Type, code, param
}

// jsonEqual reports whether a and b hold equal JSON values.
func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("unmarshal %s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// wait receives from ch or fails after 5s.
func wait[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// streamRequest starts a streaming chat request and returns the response,
// whose body the caller reads.
func (g *gateway) streamRequest(tb testing.TB, ctx context.Context, header map[string]string) *http.Response {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("stream request: %v", err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

const simpleChat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
