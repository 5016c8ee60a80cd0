package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/memgate/memgate/internal/identity"
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

// TestBreakerKeyedByTenant: a tenant whose requests make the upstream fail
// (a prompt that crashes it, say) opens its own breaker for that model
// only; another tenant, and another user of no tenant in particular, still
// reach the upstream with the same model.
func TestBreakerKeyedByTenant(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Error(500, "server_error", "", "boom"))
	g := mustGateway(t, up, breakerConfig, Deps{Resolver: identity.New(nil)})
	as := func(tenant string) map[string]string {
		return map[string]string{identity.HeaderTenant: tenant, identity.HeaderUser: "u"}
	}
	for range 3 {
		g.post(t, "/v1/chat/completions", simpleChat, as("mallory"))
	}
	up.SetHandler(upstreamtest.Default())
	if resp, b := g.post(t, "/v1/chat/completions", simpleChat, as("mallory")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("failing tenant after 3 failures: status %d, want 503 (its breaker open): %s", resp.StatusCode, b)
	}
	g.waitMetric(t, `memgate_upstream_breaker_state{host="`+up.Addr()[len("http://"):]+`",model="gpt-4o-mini"} 2`)
	for _, tenant := range []string{"acme", ""} {
		if resp, b := g.post(t, "/v1/chat/completions", simpleChat, as(tenant)); resp.StatusCode != 200 {
			t.Fatalf("tenant %q: status %d, want 200: %s", tenant, resp.StatusCode, b)
		}
	}
	if n := up.Calls(); n != 3+2 {
		t.Errorf("upstream calls %d, want 5", n)
	}
}

// TestBreakersBounded: a client inventing tenants or model names keeps at
// most max breakers, and gauge series only for the host and models of the
// kept ones; the breaker forgotten is the one used least recently, and the
// gauge of a host and model is its most open tenant's.
func TestBreakersBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := newBreakers(Breaker{ConsecutiveFailures: 1, OpenTimeout: time.Minute, HalfOpenRequests: 1}, m, slog.New(slog.DiscardHandler))
	b.max = 4
	fail := func(cb *gobreaker.CircuitBreaker[*http.Response]) {
		cb.Execute(func() (*http.Response, error) { return nil, errServerStatus })
	}
	hot := breakerKey{host: "up", tenant: "mallory", model: "m"}
	fail(b.get(hot))
	for i := range 100 {
		b.get(breakerKey{host: "up", tenant: "acme", model: "m"}) // closed, same series
		b.get(hot)
		b.get(breakerKey{host: "up", tenant: "t", model: fmt.Sprint("invented-", i)})
	}
	if n := b.lru.Len(); n > 4 || len(b.cbs) != n {
		t.Fatalf("%d breakers kept (%d in the map), want at most 4", n, len(b.cbs))
	}
	if b.get(hot).State() != gobreaker.StateOpen {
		t.Error("the breaker used the most recently was forgotten")
	}
	series := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "memgate_upstream_breaker_state" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var name string
			for _, l := range mt.GetLabel() {
				name += l.GetName() + "=" + l.GetValue() + " "
			}
			series[name] = mt.GetGauge().GetValue()
		}
	}
	if len(series) > 4 {
		t.Errorf("%d gauge series, want at most 4: %v", len(series), series)
	}
	if v, ok := series["host=up model=m "]; !ok || v != float64(gobreaker.StateOpen) {
		t.Errorf("gauge of up/m = %v (%v), want open (2): mallory's breaker is", v, ok)
	}
}

// TestBreakerModelNameBounded: the model name keys a breaker and labels
// its gauge, and comes from the client's body: a name of a megabyte, in
// a few hundred requests, held a copy per breaker and gauge series (up to
// maxBreakers of them) and a /metrics page of gigabytes. A long name is
// kept as a bounded prefix and a digest of the whole, so two long names
// still get breakers of their own.
func TestBreakerModelNameBounded(t *testing.T) {
	prefix := strings.Repeat("x", 1<<20)
	broken, healthy := prefix+"-broken", prefix+"-healthy"
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		var body struct{ Model string }
		json.Unmarshal(raw, &body)
		if body.Model == broken {
			upstreamtest.Error(500, "server_error", "", "boom").ServeHTTP(w, r)
			return
		}
		upstreamtest.Default().ServeHTTP(w, r)
	}))
	g := mustGateway(t, up, func(c *gatewayConfig) {
		breakerConfig(c)
		c.MaxBodyBytes = 4 << 20
	}, Deps{})
	for range 3 {
		g.post(t, "/v1/chat/completions", chatFor(broken), nil)
	}
	if resp, b := g.post(t, "/v1/chat/completions", chatFor(broken), nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("failing model after 3 failures: status %d, want 503 (breaker open): %.200s", resp.StatusCode, b)
	}
	if resp, b := g.post(t, "/v1/chat/completions", chatFor(healthy), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("another long model sharing its first megabyte: status %d, want 200 (a breaker of its own): %.200s", resp.StatusCode, b)
	}
	series := grepLines(g.metrics(t), "memgate_upstream_breaker_state{")
	if strings.Count(series, "\n")+1 != 2 {
		t.Errorf("breaker series, want one per long model:\n%.300s", series)
	}
	if len(series) > 1024 {
		t.Errorf("breaker series take %d bytes for two models, want a bounded label:\n%.300s…", len(series), series)
	}
}
