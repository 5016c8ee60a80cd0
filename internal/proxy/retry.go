package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// retryTransport retries an upstream attempt only when the request
// provably did not reach the upstream (it could not connect), or when the
// upstream answered 502, 503 or 504 before any byte of the body: nothing
// has been relayed to the client then, and a POST the upstream read and
// answered otherwise is never sent again. A 429 is passed to the client with
// its headers (its SDK has its own backoff). Retries wait a jittered
// exponential backoff, honouring Retry-After, capped at maxDelay. Requests
// whose body cannot be replayed (a client's streamed body) are not retried.
//
// The official OpenAI and Anthropic SDKs retry too (twice by default), so
// that one failing call does not become (1+retries)·(1+SDK retries)
// upstream attempts, the two layers take turns rather than multiply:
//   - a request that says it is already a client's retry
//     (X-Stainless-Retry-Count above 0) gets one attempt here;
//   - an answer after retries here that still failed (the upstream's 502,
//     503 or 504, or the gateway's 502 when it could not connect) carries
//     X-Should-Retry: false, which the SDKs obey: the client does not
//     repeat the whole sequence;
//   - an upstream answer with X-Should-Retry: false is not retried here
//     either.
//
// An SDK that honours X-Should-Retry thus makes at most 1+retries upstream
// attempts per call, one that only counts its retries at most
// 1+retries+its own retries.
type retryTransport struct {
	next      http.RoundTripper
	retries   int
	baseDelay time.Duration
	maxDelay  time.Duration
	retried   prometheus.Counter
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	retries := t.retries
	if clientRetry(req.Header) {
		retries = 0
	}
	for n := 0; ; n++ {
		resp, err := t.next.RoundTrip(req)
		if n >= retries || !replayable || req.Context().Err() != nil {
			if n > 0 {
				return giveUp(resp, err)
			}
			return resp, err
		}
		var delay time.Duration
		switch {
		case err != nil:
			if !notSent(err) {
				return nil, err
			}
			delay = t.backoff(n)
		case retryable(resp):
			delay = t.backoff(n)
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				delay = min(ra, t.maxDelay)
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		default:
			return resp, nil
		}
		t.retried.Inc()
		timer := time.NewTimer(delay)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, context.Cause(req.Context())
		case <-timer.C:
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// retryable reports whether an upstream answer is retried: 502, 503 or 504,
// unless the upstream said X-Should-Retry: false.
func retryable(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return resp.Header.Get("X-Should-Retry") != "false"
	}
	return false
}

// clientRetry reports whether a request says it is a client's retry of an
// earlier attempt: the official SDKs number each attempt in
// X-Stainless-Retry-Count, 0 for the first.
func clientRetry(h http.Header) bool {
	n, err := strconv.Atoi(h.Get("X-Stainless-Retry-Count"))
	return err == nil && n > 0
}

// errRetriedOut marks an upstream call that still could not connect after
// the gateway's retries: the client should not repeat it (proxyError
// answers X-Should-Retry: false).
var errRetriedOut = errors.New("upstream still unreachable after the gateway's retries")

// giveUp returns the last outcome of a call the gateway retried, telling
// the client not to repeat the sequence when it still failed in a way the
// gateway retries: the upstream's 502, 503 or 504 gets X-Should-Retry:
// false, a connection that still failed is wrapped in errRetriedOut.
func giveUp(resp *http.Response, err error) (*http.Response, error) {
	switch {
	case err != nil && notSent(err):
		return nil, fmt.Errorf("%w: %w", errRetriedOut, err)
	case err == nil && retryable(resp):
		resp.Header.Set("X-Should-Retry", "false")
	}
	return resp, err
}

// notSent reports whether a transport error proves the request never
// reached the upstream: the connection could not be made (refused,
// unreachable, no such host, or the proxy in between refused it).
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && (oe.Op == "dial" || oe.Op == "proxyconnect")
}

// isTimeout reports whether err is a timeout: a dial, TLS or first-byte
// timeout, a deadline, or the idle-stream timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, errIdleTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// backoff is the jittered delay before retry n+1: base·2ⁿ, scaled by a
// random factor in [0.5, 1.5), capped at maxDelay.
func (t *retryTransport) backoff(n int) time.Duration {
	d := t.baseDelay << min(n, 20)
	d = time.Duration(float64(d) * (0.5 + rand.Float64()))
	return min(d, t.maxDelay)
}

// retryAfter parses a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
