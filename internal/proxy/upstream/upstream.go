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
)

// MaxResponseHeaderBytes caps an upstream response head; a larger one fails
// the request (502) instead of being buffered.
const MaxResponseHeaderBytes = 1 << 20

// idleConnTimeout closes pooled upstream connections idle this long.
const idleConnTimeout = 90 * time.Second

// Options are the transport's settings (upstream.* in the configuration,
// whose defaults the wiring passes).
type Options struct {
	// ConnectTimeout bounds dialing the upstream and the TLS handshake.
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the wait for the upstream's response head.
	FirstByteTimeout time.Duration
	// MaxIdleConns is the size of the keep-alive pool per upstream host.
	MaxIdleConns int
}

// NewTransport returns the transport for opts. Keep-alive
// connections per host are opts.MaxIdleConns (sized to the gateway's
// concurrency: net/http's default of 2 makes a busy gateway dial per
// request); ConnectTimeout bounds dialing and the TLS handshake,
// FirstByteTimeout the wait for the response head. Compression is left to
// the client and the upstream: the transport never asks for it itself.
func NewTransport(opts Options) *http.Transport {
	dialer := &net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true, // negotiated by ALPN: https upstreams only
		MaxIdleConns:           opts.MaxIdleConns,
		MaxIdleConnsPerHost:    opts.MaxIdleConns,
		IdleConnTimeout:        idleConnTimeout,
		TLSHandshakeTimeout:    opts.ConnectTimeout,
		ResponseHeaderTimeout:  opts.FirstByteTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		DisableCompression:     true,
	}
}
