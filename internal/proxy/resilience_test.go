package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/upstreamtest"
)

func TestRetryBeforeFirstByte(t *testing.T) {
	ok := upstreamtest.Chat(upstreamtest.DefaultReply)
	fail := func(status int) http.Handler { return upstreamtest.Error(status, "server_error", "", "try again") }
	tests := []struct {
		name       string
		handler    http.Handler
		retries    int
		maxDelay   time.Duration
		wantStatus int
		wantCalls  int
		minElapsed time.Duration
	}{
		{"429 passed through, not retried", upstreamtest.Sequence(upstreamtest.RateLimited("1"), ok), 2, 20 * time.Millisecond, 429, 1, 0},
		{"502 503 504 then 200", upstreamtest.Sequence(fail(502), fail(503), fail(504), ok), 3, 20 * time.Millisecond, 200, 4, 0},
		{"Retry-After honoured", upstreamtest.Sequence(upstreamtest.WithHeader(fail(503), "Retry-After", "1"), ok), 2, 5 * time.Second, 200, 2, time.Second},
		{"Retry-After capped", upstreamtest.Sequence(upstreamtest.WithHeader(fail(503), "Retry-After", "120"), ok), 2, 300 * time.Millisecond, 200, 2, 300 * time.Millisecond},
		{"retries exhausted", fail(503), 2, 20 * time.Millisecond, 503, 3, 0},
		{"500 not retried", upstreamtest.Sequence(fail(500), ok), 2, 20 * time.Millisecond, 500, 1, 0},
		{"400 not retried", upstreamtest.Sequence(fail(400), ok), 2, 20 * time.Millisecond, 400, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, tt.handler)
			g := mustGateway(t, up, func(c *gatewayConfig) {
				c.Upstream.Retries = tt.retries
				c.Upstream.RetryMaxDelay = tt.maxDelay
			}, Deps{})
			start := time.Now()
			resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
			elapsed := time.Since(start)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			if n := up.Calls(); n != tt.wantCalls {
				t.Errorf("upstream calls %d, want %d", n, tt.wantCalls)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("answered after %v, want at least %v (Retry-After)", elapsed, tt.minElapsed)
			}
			if tt.maxDelay < time.Second && elapsed > 60*time.Second { // uncapped, Retry-After: 120 would take 120s
				t.Errorf("answered after %v: Retry-After was not capped", elapsed)
			}
			if tt.wantStatus == 429 && resp.Header.Get("Retry-After") != "1" {
				t.Errorf("429 relayed without its Retry-After: %v", resp.Header)
			}
			if tt.wantStatus == 200 {
				if ids := requestIDs(up); ids[0] != ids[len(ids)-1] {
					t.Errorf("retries sent different request ids %v", ids)
				}
			}
		})
	}
}

func requestIDs(up *upstreamtest.Server) []string {
	var ids []string
	for _, r := range up.Requests() {
		ids = append(ids, r.Header.Get("X-Request-Id"))
	}
	return ids
}

// TestNoResendAfterUpstreamReadRequest: an upstream that read the request
// and closed the connection without answering may have started a
// generation; the POST is not sent again.
func TestNoResendAfterUpstreamReadRequest(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{})
	// A first exchange leaves a pooled connection, which the second reuses.
	if resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var dropped atomic.Bool
	up.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dropped.CompareAndSwap(false, true) {
			panic(http.ErrAbortHandler) // read, then closed without a response
		}
		upstreamtest.Default().ServeHTTP(w, r)
	}))
	resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", resp.StatusCode, b)
	}
	if n := up.Calls(); n != 2 {
		t.Errorf("upstream calls %d, want 2 (the dropped request was sent again)", n)
	}
}

// TestRetryWhenNotConnected: a request that could not connect never reached
// the upstream, so it is retried.
func TestRetryWhenNotConnected(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.BaseURL = "http://127.0.0.1:1/v1" }, Deps{})
	resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", resp.StatusCode, b)
	}
	g.waitMetric(t, "memgate_upstream_retries_total 2")
}

func TestBreakerOpensAnswersFastAndCloses(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Error(500, "server_error", "", "boom"))
	g := mustGateway(t, up, func(c *gatewayConfig) {
		c.Upstream.Retries = 0
		c.Upstream.Breaker.ConsecutiveFailures = 3
		// Long enough that a busy machine pausing the test for a second
		// between the breaker opening and the requests below does not
		// half-open it (a probe would reach the upstream's 500).
		c.Upstream.Breaker.OpenTimeout = 3 * time.Second
	}, Deps{})
	for i := range 3 {
		if resp, _ := g.post(t, "/v1/chat/completions", simpleChat, nil); resp.StatusCode != 500 {
			t.Fatalf("request %d: status %d, want the upstream's 500", i, resp.StatusCode)
		}
	}
	g.waitMetric(t, `memgate_upstream_breaker_state{host="`+up.Addr()[len("http://"):]+`",model="gpt-4o-mini"} 2`)
	// While open, the breaker answers without calling the upstream (the
	// call count below), not by waiting: no elapsed time is asserted.
	for i := range 5 {
		resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("open breaker, request %d: status %d, want 503", i, resp.StatusCode)
		}
		if _, code, _ := apiErrorBody(t, b); code != "upstream_unavailable" {
			t.Errorf("code %q, want upstream_unavailable", code)
		}
	}
	if n := up.Calls(); n != 3 {
		t.Errorf("upstream calls %d while open, want 3", n)
	}
	up.SetHandler(nil)
	up.SetHandler(upstreamtest.Default())
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, _ := g.post(t, "/v1/chat/completions", simpleChat, nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker did not close: status %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := up.Calls(); n != 4 {
		t.Errorf("upstream calls %d after closing, want 4", n)
	}
}

func TestUpstreamTimeouts(t *testing.T) {
	t.Run("first byte", func(t *testing.T) {
		up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		g := mustGateway(t, up, func(c *gatewayConfig) {
			c.Upstream.FirstByteTimeout = 100 * time.Millisecond
		}, Deps{})
		resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", resp.StatusCode, b)
		}
		if _, code, _ := apiErrorBody(t, b); code != "upstream_timeout" {
			t.Errorf("code %q, want upstream_timeout", code)
		}
		if n := up.Calls(); n != 1 {
			t.Errorf("upstream calls %d, want 1 (timeouts are not retried)", n)
		}
	})
	t.Run("idle stream", func(t *testing.T) {
		feed := upstreamtest.NewFeed()
		up := upstreamtest.New(t, feed)
		g := mustGateway(t, up, func(c *gatewayConfig) {
			// Long enough that a busy machine's pause between the
			// response's head and the first event does not abort the
			// stream before it.
			c.Upstream.IdleStreamTimeout = 2 * time.Second
		}, Deps{})
		resp := g.streamRequest(t, context.Background(), nil)
		br := bufio.NewReader(resp.Body)
		feed.Send(t, `{"n":1}`)
		readEvent(t, br)
		wait(t, feed.Canceled(), "idle upstream stream to be cancelled")
		if _, err := io.ReadAll(br); err == nil {
			t.Error("client saw a clean end of an aborted stream")
		}
	})
}
