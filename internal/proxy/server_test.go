package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/upstreamtest"
)

func TestMetricsExposed(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{})
	g.post(t, "/v1/chat/completions", simpleChat, nil)
	g.post(t, "/v1/chat/completions", `{`, nil)
	m := g.metrics(t)
	for _, want := range []string{
		`memgate_http_requests_total{route="chat",status="200"} 1`,
		`memgate_http_requests_total{route="chat",status="400"} 1`,
		`memgate_http_request_duration_seconds_count{route="chat",status="200"} 1`,
		`memgate_upstream_duration_seconds_count{route="chat"} 1`,
		`memgate_gateway_overhead_seconds_count{route="chat"} 1`,
		`memgate_upstream_breaker_state{host="` + strings.TrimPrefix(up.Addr(), "http://") + `",model="gpt-4o-mini"} 0`,
		`memgate_http_in_flight_requests 0`,
		`memgate_memory_degraded_total{part="recall"} 0`,
		`memgate_memory_load_seconds_count 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	up := upstreamtest.New(t, nil)
	ready := make(chan error, 1)
	srv, p := newGateway(t, testConfig(up), Deps{}, func(context.Context) error { return <-ready }, io.Discard)
	url, _ := mustRun(t, srv, p)
	g := &gateway{URL: url}
	get := func(path string) int {
		req, _ := http.NewRequest("GET", g.URL+path, nil)
		resp, _ := do(t, req)
		return resp.StatusCode
	}
	if s := get("/healthz"); s != 200 {
		t.Errorf("/healthz %d", s)
	}
	ready <- nil
	if s := get("/readyz"); s != 200 {
		t.Errorf("/readyz ready: %d", s)
	}
	ready <- io.ErrUnexpectedEOF
	if s := get("/readyz"); s != 503 {
		t.Errorf("/readyz failing: %d, want 503", s)
	}
	req, _ := http.NewRequest("GET", g.URL+"/nope", nil)
	resp, b := do(t, req)
	if resp.StatusCode != 404 {
		t.Errorf("unknown route %d", resp.StatusCode)
	}
	apiErrorBody(t, b)
}

func TestLogsHoldNoSecrets(t *testing.T) {
	const secret, content = "sk-very-secret-123", "my private diary entry"
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = "sk-upstream-secret" }, Deps{Resolver: identity.New(nil)})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + content + `"}]}`
	h := map[string]string{"Authorization": "Bearer " + secret, "X-Memory-User": "alice"}
	g.post(t, "/v1/chat/completions", body, h)
	up.SetHandler(upstreamtest.Error(503, "server_error", "", "down"))
	g.post(t, "/v1/chat/completions", body, h)
	up.SetHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	g.post(t, "/v1/chat/completions", body, h)
	g.post(t, "/v1/embeddings", body, h)
	logs := g.logs.String()
	if !strings.Contains(logs, `"msg":"request"`) || !strings.Contains(logs, "upstream request failed") {
		t.Fatalf("expected access and error logs, got:\n%s", logs)
	}
	for _, s := range []string{secret, "sk-upstream-secret", content, "Bearer"} {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %q:\n%s", s, logs)
		}
	}
}

func newServer(tb testing.TB, up *upstreamtest.Server, grace time.Duration) (*server.Server, *Proxy) {
	tb.Helper()
	cfg := testConfig(up)
	cfg.ShutdownGrace = grace
	return newGateway(tb, cfg, Deps{}, nil, io.Discard)
}

func TestShutdownLetsInFlightStreamFinish(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	srv, p := newServer(t, up, 10*time.Second)
	url, stop := mustRun(t, srv, p)
	g := &gateway{URL: url}
	resp := g.streamRequest(t, context.Background(), nil)
	br := bufio.NewReader(resp.Body)
	feed.Send(t, `{"n":1}`)
	readEvent(t, br)

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// New connections are refused once shutdown began.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still accepting during shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
	feed.Send(t, `{"n":2}`)
	if got := readEvent(t, br); got != "data: {\"n\":2}\n" {
		t.Fatalf("event during shutdown %q", got)
	}
	select {
	case <-stopped:
		t.Fatal("Run returned while a stream was in flight")
	default:
	}
	feed.End(t)
	if got := readEvent(t, br); got != "data: [DONE]\n" {
		t.Fatalf("last event %q", got)
	}
	if err := wait(t, stopped, "shutdown"); err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestShutdownCancelsStreamsAfterGrace(t *testing.T) {
	feed := upstreamtest.NewFeed()
	up := upstreamtest.New(t, feed)
	srv, p := newServer(t, up, 100*time.Millisecond)
	url, stop := mustRun(t, srv, p)
	g := &gateway{URL: url}
	resp := g.streamRequest(t, context.Background(), nil)
	br := bufio.NewReader(resp.Body)
	feed.Send(t, `{"n":1}`)
	readEvent(t, br)
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	wait(t, feed.Canceled(), "upstream stream to be cancelled")
	if _, err := io.ReadAll(br); err == nil {
		t.Error("client saw a clean end of a cancelled stream")
	}
}

func TestRunReturnsAfterDirectShutdown(t *testing.T) {
	up := upstreamtest.New(t, nil)
	s, _ := newServer(t, up, time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, done, "Run"); err != nil {
		t.Errorf("Run after Shutdown: %v", err)
	}
}
