package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// sdkAttempts calls path like the official OpenAI and Anthropic SDKs do:
// up to 1+retries attempts, numbered in X-Stainless-Retry-Count, repeating
// an answer of 408, 409, 429 or 5xx — unless, when honour is set, the
// answer says X-Should-Retry (true or false), which then decides. It does
// not wait between attempts (the SDKs' backoff changes nothing counted
// here). It returns the attempts made and the last answer.
func sdkAttempts(t *testing.T, g *gateway, path, body string, retries int, honour bool) (int, *http.Response, []byte) {
	t.Helper()
	for n := 0; ; n++ {
		resp, b := g.post(t, path, body, map[string]string{"X-Stainless-Retry-Count": strconv.Itoa(n)})
		again := resp.StatusCode == 408 || resp.StatusCode == 409 || resp.StatusCode == 429 || resp.StatusCode >= 500
		if v := resp.Header.Get("X-Should-Retry"); honour && (v == "true" || v == "false") {
			again = v == "true"
		}
		if !again || n >= retries {
			return n + 1, resp, b
		}
	}
}

// TestRetriesDoNotMultiply: an upstream that always fails with a status
// memgate retries is called at most 1+retries times for one SDK call that
// honours X-Should-Retry, and 1+retries+SDK retries times for one that only
// numbers its attempts — not (1+retries)·(1+SDK retries).
func TestRetriesDoNotMultiply(t *testing.T) {
	const gatewayRetries, sdkRetries = 2, 2
	tests := []struct {
		name string
		// honour: the client obeys X-Should-Retry.
		honour                bool
		wantCalls, wantTries  int
		wantStatus            int
		wantShouldRetryHeader string
	}{
		{"SDK honours X-Should-Retry", true, 1 + gatewayRetries, 1, 503, "false"},
		{"SDK ignores X-Should-Retry", false, 1 + gatewayRetries + sdkRetries, 1 + sdkRetries, 503, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, upstreamtest.Error(http.StatusServiceUnavailable, "server_error", "", "The engine is currently overloaded."))
			g := mustGateway(t, up, func(c *gatewayConfig) {
				c.Upstream.Retries = gatewayRetries
				// The breaker would bound the calls too: not here.
				c.Upstream.Breaker.ConsecutiveFailures = 100
			}, Deps{})
			tries, resp, b := sdkAttempts(t, g, "/v1/chat/completions", simpleChat, sdkRetries, tt.honour)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			if n := up.Calls(); n != tt.wantCalls {
				t.Errorf("upstream calls %d for one SDK call, want %d", n, tt.wantCalls)
			}
			if tries != tt.wantTries {
				t.Errorf("SDK attempts %d, want %d", tries, tt.wantTries)
			}
			if tt.honour {
				return
			}
			// The SDK's own retries each got one attempt, and the last
			// answer (an SDK retry, not retried here) leaves the decision
			// to the SDK.
			if v := resp.Header.Get("X-Should-Retry"); v != tt.wantShouldRetryHeader {
				t.Errorf("X-Should-Retry %q on the last answer, want %q", v, tt.wantShouldRetryHeader)
			}
		})
	}
}

// TestGiveUpTellsClient: once memgate's own retries are used up the answer
// says X-Should-Retry: false — the upstream's 502/503/504 and the gateway's
// 502 for an upstream it could not connect to; without retries here (none
// configured, or an answer memgate does not retry) the client decides, and
// a 429 keeps its Retry-After.
func TestGiveUpTellsClient(t *testing.T) {
	fail := func(status int) http.Handler { return upstreamtest.Error(status, "server_error", "", "try again") }
	tests := []struct {
		name       string
		handler    http.Handler
		retries    int
		unreached  bool
		wantStatus int
		wantCalls  int
		want       string
	}{
		{"retried 503", fail(503), 2, false, 503, 3, "false"},
		{"retried 502 then 504", upstreamtest.Sequence(fail(502), fail(504)), 1, false, 504, 2, "false"},
		{"could not connect", nil, 2, true, 502, 0, "false"},
		{"no retries configured", fail(503), 0, false, 503, 1, ""},
		{"500 not retried", fail(500), 2, false, 500, 1, ""},
		{"429 with Retry-After", upstreamtest.RateLimited("7"), 2, false, 429, 1, ""},
		{"upstream says do not retry", upstreamtest.WithHeader(fail(503), "X-Should-Retry", "false"), 2, false, 503, 1, "false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, tt.handler)
			g := mustGateway(t, up, func(c *gatewayConfig) {
				c.Upstream.Retries = tt.retries
				if tt.unreached {
					c.Upstream.BaseURL = "http://127.0.0.1:1/v1"
				}
			}, Deps{})
			resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			if n := up.Calls(); n != tt.wantCalls {
				t.Errorf("upstream calls %d, want %d", n, tt.wantCalls)
			}
			if v := resp.Header.Get("X-Should-Retry"); v != tt.want {
				t.Errorf("X-Should-Retry %q, want %q", v, tt.want)
			}
			if tt.wantStatus == 429 && resp.Header.Get("Retry-After") != "7" {
				t.Errorf("429 without its Retry-After: %v", resp.Header)
			}
		})
	}
}

// sdkFailure is what testdata/sdk/failing.mjs prints of one SDK's error.
type sdkFailure struct {
	Class       string `json:"class"`
	Status      int    `json:"status"`
	Message     string `json:"message"`
	ShouldRetry string `json:"should_retry"`
}

// runFailingSDKs runs the official openai and @anthropic-ai/sdk clients,
// with their default two retries, once each against g, and returns what
// each threw.
func runFailingSDKs(t *testing.T, g *gateway) (openai, anthropic sdkFailure) {
	t.Helper()
	out := dialecttest.RunScript(t, "failing.mjs", "OPENAI_BASE_URL="+g.URL+"/v1", "ANTHROPIC_BASE_URL="+g.URL)
	var res struct{ OpenAI, Anthropic sdkFailure }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return res.OpenAI, res.Anthropic
}

// TestOfficialSDKRetriesDoNotMultiply: the official SDKs, retrying twice by
// default, in front of an upstream that always answers 503: each call
// reaches the upstream 1+retries times (memgate's attempts), not
// (1+retries)·3.
func TestOfficialSDKRetriesDoNotMultiply(t *testing.T) {
	const gatewayRetries = 2
	up := upstreamtest.New(t, upstreamtest.Error(http.StatusServiceUnavailable, "server_error", "", "The engine is currently overloaded."))
	g := mustGateway(t, up, func(c *gatewayConfig) {
		c.Upstream.Anthropic.BaseURL = up.URL()
		c.Upstream.Retries = gatewayRetries
		c.Upstream.Breaker.ConsecutiveFailures = 100
	}, Deps{})
	openai, anthropic := runFailingSDKs(t, g)
	for name, f := range map[string]sdkFailure{"openai": openai, "anthropic": anthropic} {
		if f.Status != 503 || f.ShouldRetry != "false" {
			t.Errorf("%s SDK: %+v, want 503 with X-Should-Retry: false", name, f)
		}
	}
	calls := map[string]int{}
	for _, r := range up.Requests() {
		calls[r.Path]++
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		if calls[path] != 1+gatewayRetries {
			t.Errorf("%s: %d upstream calls for one SDK call, want %d", path, calls[path], 1+gatewayRetries)
		}
	}
}
