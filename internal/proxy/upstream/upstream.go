// Package upstream builds the http.Transport memgate forwards with, tuned
// for a gateway rather than for a browser-like client: an idle pool per
// upstream host sized to the gateway's concurrency, a cap on response heads,
// dial, TLS-handshake and first-byte timeouts, and HTTP/2 to https
// upstreams. The benchmark's reference proxy uses the same transport, so
// comparisons measure memgate's own work.
package upstream

import (
	"net"
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/config"
)

// MaxResponseHeaderBytes caps an upstream response head; a larger one fails
// the request (502) instead of being buffered.
const MaxResponseHeaderBytes = 1 << 20

// idleConnTimeout closes pooled upstream connections idle this long.
const idleConnTimeout = 90 * time.Second

// NewTransport returns the transport for cfg's upstream. Keep-alive
// connections per host are cfg.MaxIdleConns (sized to the gateway's
// concurrency: net/http's default of 2 makes a busy gateway dial per
// request); ConnectTimeout bounds dialing and the TLS handshake,
// FirstByteTimeout the wait for the response head. Compression is left to
// the client and the upstream: the transport never asks for it itself.
func NewTransport(cfg config.Upstream) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout.D(), KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true, // negotiated by ALPN: https upstreams only
		MaxIdleConns:           cfg.MaxIdleConns,
		MaxIdleConnsPerHost:    cfg.MaxIdleConns,
		IdleConnTimeout:        idleConnTimeout,
		TLSHandshakeTimeout:    cfg.ConnectTimeout.D(),
		ResponseHeaderTimeout:  cfg.FirstByteTimeout.D(),
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		DisableCompression:     true,
	}
}
