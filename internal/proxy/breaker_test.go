package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// breakerConfig opens a breaker after 3 consecutive failures, for long
// enough that a test sees it open, with no retries.
func breakerConfig(c *gatewayConfig) {
	c.Upstream.Retries = 0
	c.Upstream.Breaker.ConsecutiveFailures = 3
	c.Upstream.Breaker.OpenTimeout = time.Minute
}

func chatFor(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
}

// TestBreakerKeyedByModel: one model failing opens its own breaker only;
// another model on the same upstream is still served.
func TestBreakerKeyedByModel(t *testing.T) {
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		var body struct{ Model string }
		json.Unmarshal(raw, &body)
		if body.Model == "broken" {
			upstreamtest.Error(500, "server_error", "", "boom").ServeHTTP(w, r)
			return
		}
		upstreamtest.Default().ServeHTTP(w, r)
	}))
	g := mustGateway(t, up, breakerConfig, Deps{})
	for range 3 {
		g.post(t, "/v1/chat/completions", chatFor("broken"), nil)
	}
	resp, b := g.post(t, "/v1/chat/completions", chatFor("broken"), nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("failing model after 3 failures: status %d, want 503 (breaker open): %s", resp.StatusCode, b)
	}
	for range 5 {
		if resp, b := g.post(t, "/v1/chat/completions", chatFor("gpt-4o-mini"), nil); resp.StatusCode != 200 {
			t.Fatalf("healthy model: status %d: %s", resp.StatusCode, b)
		}
	}
	if n := up.Calls(); n != 3+5 {
		t.Errorf("upstream calls %d, want 8", n)
	}
}

// TestBreakerIgnores4xx: client errors say nothing about the upstream's
// health.
func TestBreakerIgnores4xx(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Error(400, "invalid_request_error", "", "bad"))
	g := mustGateway(t, up, breakerConfig, Deps{})
	for i := range 6 {
		if resp, _ := g.post(t, "/v1/chat/completions", simpleChat, nil); resp.StatusCode != 400 {
			t.Fatalf("request %d: status %d, want the upstream's 400", i, resp.StatusCode)
		}
	}
	if n := up.Calls(); n != 6 {
		t.Errorf("upstream calls %d, want 6", n)
	}
}

// TestClientHangUpsDoNotOpenBreaker: clients cancelling their in-flight
// requests (as every load run's end does) are not upstream failures.
func TestClientHangUpsDoNotOpenBreaker(t *testing.T) {
	arrived := make(chan struct{}, 16)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	up := upstreamtest.New(t, slow)
	g := mustGateway(t, up, breakerConfig, Deps{})
	for i := range 8 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(simpleChat))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		wait(t, arrived, "request "+string(rune('0'+i))+" upstream")
		cancel()
		<-done
	}
	g.waitMetric(t, `memgate_http_requests_total{route="chat",status="499"} 8`)
	up.SetHandler(upstreamtest.Default())
	if resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil); resp.StatusCode != 200 {
		t.Fatalf("after 8 hang-ups: status %d, want 200: %s", resp.StatusCode, b)
	}
}
