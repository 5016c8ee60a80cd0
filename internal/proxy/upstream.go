package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/coarse"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/h1client"
)

// upstream is the client for the OpenAI-compatible API memgate forwards to:
// a pooled transport behind per-host circuit breakers, with retries for chat
// completions.
type upstream struct {
	base      *url.URL
	transport *http.Transport
	rt        http.RoundTripper
	// chat sends chat completions: through h1 (no goroutine hand-offs per
	// request) when the upstream is plain http:// and reached without a
	// proxy, else through rt.
	chat http.RoundTripper
	h1   *h1client.Transport
	// auth is "Bearer <api key>", or "" to pass the client's Authorization.
	auth           string
	retries        int
	baseDelay      time.Duration
	maxDelay       time.Duration
	chatTarget     *url.URL
	retriesCounter interface{ Inc() }
}

func newUpstream(cfg config.Upstream, breakers *breakers, m *metrics, clock *coarse.Clock) (*upstream, error) {
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("upstream base url: %w", err)
	}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout.D(), KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          cfg.MaxIdleConns,
		MaxIdleConnsPerHost:   cfg.MaxIdleConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.ConnectTimeout.D(),
		ResponseHeaderTimeout: cfg.FirstByteTimeout.D(),
		ExpectContinueTimeout: time.Second,
		// The proxy relays bytes: it never asks for compression itself, and
		// passes the client's Accept-Encoding through on pass-through routes.
		DisableCompression: true,
		ReadBufferSize:     16 << 10,
		WriteBufferSize:    16 << 10,
	}
	u := &upstream{
		base:           base,
		transport:      t,
		rt:             &breakerTransport{next: &idleTransport{next: t, d: cfg.IdleStreamTimeout.D(), clock: clock}, breakers: breakers},
		retries:        cfg.Retries,
		baseDelay:      cfg.RetryBaseDelay.D(),
		maxDelay:       cfg.RetryMaxDelay.D(),
		retriesCounter: m.retries,
	}
	if cfg.APIKey != "" {
		u.auth = "Bearer " + cfg.APIKey
	}
	u.chatTarget = u.target("/v1/chat/completions")
	u.chat = u.rt
	if proxied, err := http.ProxyFromEnvironment(&http.Request{URL: u.chatTarget}); base.Scheme == "http" && err == nil && proxied == nil {
		u.h1 = &h1client.Transport{
			DialTimeout:           cfg.ConnectTimeout.D(),
			ResponseHeaderTimeout: cfg.FirstByteTimeout.D(),
			BodyIdleTimeout:       cfg.IdleStreamTimeout.D(),
			MaxIdleConnsPerHost:   cfg.MaxIdleConns,
			IdleConnTimeout:       90 * time.Second,
			Clock:                 clock,
		}
		u.chat = &breakerTransport{next: u.h1, breakers: breakers}
	}
	return u, nil
}

// closeIdle closes the pooled upstream connections.
func (u *upstream) closeIdle() {
	u.transport.CloseIdleConnections()
	if u.h1 != nil {
		u.h1.CloseIdleConnections()
	}
}

// target maps a client path under /v1 onto the upstream base URL.
func (u *upstream) target(path string) *url.URL {
	t := *u.base
	t.Path = u.base.Path + strings.TrimPrefix(path, "/v1")
	t.RawPath = ""
	return &t
}

// isHopHeader reports the connection-level headers never forwarded (RFC
// 9110 7.6.1), by canonical key. A switch, not a map: it runs for every
// header field of every chat request and response.
func isHopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// outHeader turns the client's header h of a chat request into the header
// of the request to the upstream, in place (the client's header is not
// needed after this, and a copy per request was a measurable share of the
// gateway's CPU time): it drops hop-by-hop and X-Memory-* fields,
// Content-Length and Accept-Encoding (the body is read for capture) and
// Host, sets X-Request-Id, and replaces Authorization with the configured
// key (or drops it when gateway keys are in use and none is configured).
func (u *upstream) outHeader(h http.Header, requestID string, dropAuth bool) http.Header {
	// Headers the client's Connection header names are hop-by-hop too.
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				delete(h, http.CanonicalHeaderKey(name))
			}
		}
	}
	for k := range h {
		if isHopHeader(k) || isMemoryHeader(k) || k == "Content-Length" || k == "Accept-Encoding" || k == "Host" {
			delete(h, k)
		}
	}
	u.setAuth(h, dropAuth)
	h["X-Request-Id"] = []string{requestID}
	return h
}

func (u *upstream) setAuth(h http.Header, dropAuth bool) {
	switch {
	case u.auth != "":
		h["Authorization"] = []string{u.auth}
	case dropAuth:
		delete(h, "Authorization")
	}
}

// isMemoryHeader reports whether a canonical header key is one of memgate's
// own X-Memory-* request headers, which never go upstream.
func isMemoryHeader(k string) bool { return len(k) > 9 && k[:9] == "X-Memory-" }

// postChat sends body to the chat completions endpoint, retrying connection
// errors, 429, 502, 503 and 504 with jittered exponential backoff (honouring
// Retry-After, capped at RetryMaxDelay). Nothing has been written to the
// client while it retries. The transport may read body until the exchange
// is over, so the caller must not reuse its bytes.
//
// The body is an io.NopCloser over a *bytes.Reader on purpose: net/http
// recognises that in-memory reader and writes headers and body in one
// flush (one syscall, one packet) instead of flushing the headers first.
func (u *upstream) postChat(ctx context.Context, header http.Header, body []byte) (resp *http.Response, err error) {
	getBody := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	for n := 0; ; n++ {
		// A value, not a pointer: WithContext makes the one copy that
		// escapes.
		r := http.Request{
			Method:        http.MethodPost,
			URL:           u.chatTarget,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        header,
			Body:          io.NopCloser(bytes.NewReader(body)),
			GetBody:       getBody,
			ContentLength: int64(len(body)),
			Host:          u.base.Host,
		}
		req := r.WithContext(ctx)
		resp, err = u.chat.RoundTrip(req)
		if n >= u.retries || ctx.Err() != nil {
			return resp, err
		}
		var delay time.Duration
		switch {
		case err != nil:
			if !retryableErr(err) {
				return nil, err
			}
			delay = u.backoff(n)
		case retryableStatus(resp.StatusCode):
			delay = u.backoff(n)
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				delay = min(ra, u.maxDelay)
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		default:
			return resp, nil
		}
		u.retriesCounter.Inc()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// backoff is the jittered delay before retry n+1: base·2ⁿ, scaled by a
// random factor in [0.5, 1.5), capped at RetryMaxDelay.
func (u *upstream) backoff(n int) time.Duration {
	d := u.baseDelay << min(n, 20)
	d = time.Duration(float64(d) * (0.5 + rand.Float64()))
	return min(d, u.maxDelay)
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableErr reports whether a transport error is a connection failure
// worth retrying: not a cancellation, an open breaker or a timeout.
func retryableErr(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errBreakerOpen) {
		return false
	}
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
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

// upstreamError translates a failed upstream call into the gateway error the
// client gets: 503 for an open breaker, 504 for a timeout, else 502.
func upstreamError(err error) *apiError {
	var ne net.Error
	switch {
	case errors.Is(err, errBreakerOpen):
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeUpstream, Code: "upstream_unavailable",
			Message: "The upstream API is failing; memgate's circuit breaker is open. Retry later."}
	case errors.Is(err, errIdleTimeout), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &apiError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: "upstream_timeout",
			Message: "The upstream API did not answer in time."}
	}
	return &apiError{Status: http.StatusBadGateway, Type: typeUpstream, Code: "upstream_error",
		Message: "The upstream API could not be reached."}
}

// errIdleTimeout is the cause of a request cancelled because its upstream
// body stayed silent for IdleStreamTimeout.
var errIdleTimeout = errors.New("upstream stream idle timeout")

// idleTransport bounds the silences of a response body for a transport
// that cannot (net/http's): each request goes out under a context of its
// own, cancelled with errIdleTimeout when no byte of the body arrives for d
// (up to the clock's resolution more), and when the body is closed.
// h1client does the same itself (BodyIdleTimeout), so both transports own
// the idle-stream timeout and no handler has to.
type idleTransport struct {
	next  http.RoundTripper
	d     time.Duration
	clock *coarse.Clock
}

// RoundTrip implements http.RoundTripper.
func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel(nil)
		return nil, err
	}
	b := &idleBody{ReadCloser: resp.Body, d: t.d, cancel: cancel}
	t.clock.Arm(&b.timer, b.d, func() { cancel(errIdleTimeout) })
	resp.Body = b
	return resp, nil
}

// idleBody is a response body whose request is cancelled when no byte
// arrives for d, and once it is closed.
type idleBody struct {
	io.ReadCloser
	timer  coarse.Timer
	d      time.Duration
	cancel context.CancelCauseFunc
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.d)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
