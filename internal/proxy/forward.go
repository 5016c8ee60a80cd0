package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/server"
)

// forward is one request's state across the reverse proxy's hooks and the
// transport layers, carried in the request context.
type forward struct {
	x *server.Exchange
	// api is the API the request is for: its upstream and error shape.
	api *api
	// memory is true on the routes served with memory: the response may
	// be captured, and Accept-Encoding is dropped so it can be read.
	memory bool
	// tenant and model key the circuit breaker with the upstream host
	// (tenant "": the request was not identified).
	tenant, model string
	start         time.Time
	// capture is the pending capture of a memory-on exchange, or nil.
	capture *exchangeCapture
	// background is a GET of a background response whose exchange's
	// capture this process holds for the caller (pending.go), or nil.
	background *backgroundGet
	// bind binds the provider state a 2xx reply creates to the request's
	// tenant and user, or is nil.
	bind *stateBind
	// models: a request with the operator's key reads the provider's
	// models (see models.go).
	models bool
	// download: the reply is a file's content (files.go), relayed
	// byte for byte.
	download bool
	// decodes: the gateway dropped the client's Accept-Encoding to read
	// the reply, and decodes one the upstream compressed anyway
	// (encoding.go).
	decodes bool
	// bodyRead: the gateway read the client's body before forwarding it
	// (on memory routes, memory says so).
	bodyRead bool
	// bodyFailed is set when reading the client's streamed request body
	// failed (malformed chunking, a client gone mid-upload): the upstream
	// call failed for the client's sake, not the upstream's. The
	// transport reads the body on a goroutine of its own.
	bodyFailed atomic.Bool
}

// clientBody is a client's request body streamed upstream, noting a failed
// read in its forward.
type clientBody struct {
	io.ReadCloser
	f *forward
}

func (b clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.f.bodyFailed.Store(true)
	}
	return n, err
}

type forwardKey struct{}

// max1xx bounds the informational (1xx) responses relayed before the final
// one: net/http leaves that limit to whoever receives them (the reverse
// proxy relays each to the client), so an upstream sending them without end
// would hold the client until the first-byte timeout.
const max1xx = 5

// errTooMany1xx fails an upstream request whose upstream sent more than
// max1xx informational responses.
var errTooMany1xx = errors.New("upstream sent too many 1xx responses")

// withForward returns r for the reverse proxy: carrying f, and with a trace
// that fails the upstream request past max1xx informational responses. The
// trace is installed before the reverse proxy's own (which relays each 1xx),
// so its error is the one the transport sees.
func withForward(r *http.Request, f *forward) *http.Request {
	n := 0
	ctx := httptrace.WithClientTrace(context.WithValue(r.Context(), forwardKey{}, f), &httptrace.ClientTrace{
		Got1xxResponse: func(int, textproto.MIMEHeader) error {
			if n++; n > max1xx {
				return errTooMany1xx
			}
			return nil
		},
	})
	return r.WithContext(ctx)
}

func forwardOf(ctx context.Context) *forward {
	f, _ := ctx.Value(forwardKey{}).(*forward)
	return f
}

// newReverseProxy returns the one reverse proxy every route goes through:
// the request goes upstream unchanged (minus hop-by-hop and X-Memory-*
// headers, with the gateway's auth rule and X-Request-Id), the response
// comes back unchanged. Event streams and bodies of unknown length are
// flushed after every write (ReverseProxy's FlushInterval -1 for them).
func (p *Proxy) newReverseProxy(rt http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      rt,
		BufferPool:     bufferPool{},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.proxyError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
}

// rewrite maps the client's request onto its API's upstream.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	f := forwardOf(pr.In.Context())
	t := p.chat.up
	if f != nil && f.api != nil {
		t = f.api.up
	}
	in := pr.In.URL
	out := *t.base
	out.Path = t.base.Path + strings.TrimPrefix(in.Path, "/v1")
	out.RawPath = ""
	if in.RawPath != "" {
		out.RawPath = t.base.EscapedPath() + strings.TrimPrefix(in.RawPath, "/v1")
	}
	out.RawQuery = in.RawQuery
	pr.Out.URL = &out
	pr.Out.Host = ""
	h := pr.Out.Header
	for k := range h {
		if isMemoryHeader(k) {
			delete(h, k)
		}
	}
	// A browser's cookies for the gateway's host are every app's on that
	// host (cookies ignore ports): none is the provider's.
	delete(h, "Cookie")
	// With gateway keys the client's Authorization is its gateway key.
	// Rewrite runs after the reverse proxy dropped the headers the
	// client's Connection names, so what is set here goes as set.
	t.authorize(h, p.requireKey())
	if t.shared() {
		// The operator's key: the tenant does not choose which of the
		// operator's organizations or projects the request bills and reads.
		for _, k := range accountRequestHeaders {
			delete(h, k)
		}
	}
	if f == nil {
		return
	}
	h["X-Request-Id"] = []string{f.x.ID()}
	if f.memory {
		// A memory-on exchange is one request and its reply, read and
		// captured: the reverse proxy would forward the client's
		// Upgrade, and a protocol the upstream switched to would carry
		// the operator's key past memory, capture and the per-tenant
		// checks of every later message. Without it, a 101 is refused.
		delete(h, "Upgrade")
		delete(h, "Connection")
	}
	if f.memory || f.bodyRead {
		// The gateway read the body, answering the client's Expect
		// itself: forwarded, it would make the transport wait for an
		// upstream 100 and relay it as the client's second.
		delete(h, "Expect")
		// The body is JSON the gateway read (and wrote, with memory):
		// it goes with its type even when the client's Connection
		// header named Content-Type away.
		if ct, ok := pr.In.Header["Content-Type"]; ok {
			h["Content-Type"] = ct
		} else if f.memory {
			h["Content-Type"] = []string{"application/json"}
		}
	}
	if f.memory || t.shared() || f.background != nil {
		// Read here: for capture, or to scrub the operator's account out.
		delete(h, "Accept-Encoding")
		f.decodes = true
	}
	f.start = time.Now()
}

// isMemoryHeader reports whether a canonical header key is one of memgate's
// own X-Memory-* headers: the client's never go upstream, the upstream's
// never reach the client.
func isMemoryHeader(k string) bool { return len(k) > 9 && k[:9] == "X-Memory-" }

// modifyResponse renames the upstream's X-Request-Id (the gateway's own id
// stays), gives an Anthropic answer without request-id the gateway's
// id there (setRequestID), drops its X-Memory-* headers and trailers (the gateway's own
// vocabulary, as on the request: an upstream's, a chained memgate's say
// nothing of this gateway's memory, and a second X-Memory-Conversation
// would reach the client beside the gateway's) and its cookies (see
// dropUpstreamOwn), times the upstream body, scrubs the operator's account out of
// the answer to a request that carried the operator's key, and attaches
// the binding of the provider state the reply creates and the capture of
// a memory-on exchange.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	if v, ok := resp.Header["X-Request-Id"]; ok {
		delete(resp.Header, "X-Request-Id")
		resp.Header["X-Upstream-Request-Id"] = v
	}
	dropUpstreamOwn(resp.Header)
	// Trailers arrive, announced or not, when the body ends (over
	// HTTP/2 in a map the transport may only then make).
	dropUpstreamOwn(resp.Trailer)
	if resp.StatusCode != http.StatusSwitchingProtocols { // its body is the connection
		resp.Body = &trailerBody{ReadCloser: resp.Body, trailer: &resp.Trailer}
		// Relayed under the gateway's origin, which the management API
		// and the inspector share (and, without a key, a top-level
		// navigation reaches /v1): a document the upstream sends (a
		// file's content, an error page) opens sandboxed, in an origin
		// of its own, so its script reads nothing of the gateway's. A
		// second policy only narrows the upstream's; API clients
		// ignore both.
		resp.Header.Add("Content-Security-Policy", "sandbox")
		resp.Header.Set("X-Content-Type-Options", "nosniff")
	}
	f := forwardOf(resp.Request.Context())
	if f == nil {
		return nil
	}
	// Decoded first: everything after reads, and the client gets, the
	// reply as the upstream meant it; a stream that stops decoding is
	// a broken upstream body to timedBody.
	undecoded, err := decode(resp, f)
	if err != nil {
		return err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, f: f, ctx: resp.Request.Context()}
	if f.api == p.messages {
		// The Anthropic SDKs read a request's id from request-id.
		setRequestID(resp.Header, f.x.ID())
	}
	if f.api != nil && f.api.up.shared() {
		if err := p.scrub(resp, f); err != nil {
			return err
		}
	}
	if f.bind != nil && resp.StatusCode/100 == 2 {
		// Over the scrubbed body, under the capture's tee: the state is
		// bound as the client sees it, before the client, or the
		// capture, reads the reply that names it.
		if err := f.bind.attach(resp.Request.Context(), resp); err != nil {
			return err
		}
	}
	if f.capture != nil && resp.StatusCode/100 == 2 {
		return f.capture.attach(resp.Request.Context(), resp, undecoded)
	}
	if f.background != nil && resp.StatusCode/100 == 2 && undecoded == nil {
		return f.background.attach(resp.Request.Context(), resp)
	}
	return nil
}

// dropUpstreamOwn deletes from an upstream's response headers or trailers
// what only the gateway may say on its origin: X-Memory-* (its memory
// vocabulary) and Set-Cookie, Set-Cookie2 (the web inspector shares the
// origin, its session is a cookie).
func dropUpstreamOwn(h http.Header) {
	for k := range h {
		if isMemoryHeader(k) || k == "Set-Cookie" || k == "Set-Cookie2" {
			delete(h, k)
		}
	}
}

// trailerBody is an upstream body whose trailers lose what
// dropUpstreamOwn drops once the transport fills them in: at the end of
// the body, and when it is closed (which the reverse proxy does before it
// copies them).
type trailerBody struct {
	io.ReadCloser
	trailer *http.Header
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		dropUpstreamOwn(*b.trailer)
	}
	return n, err
}

func (b *trailerBody) Close() error {
	err := b.ReadCloser.Close()
	dropUpstreamOwn(*b.trailer)
	return err
}

// proxyError answers a request whose upstream call failed before a
// response: nothing when the client is gone (recorded as 499), else the
// gateway error in its API's shape.
func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	f := forwardOf(r.Context())
	if f != nil && !f.start.IsZero() {
		f.x.AddUpstream(time.Since(f.start))
	}
	if r.Context().Err() != nil {
		if context.Cause(r.Context()) != server.ErrShutdown {
			server.ExchangeOf(r.Context()).SetStatus(server.StatusClientClosed)
		}
		return
	}
	writeError := apierr.Write
	if f != nil && f.api != nil {
		writeError = f.api.writeError
	}
	if f != nil && f.bodyFailed.Load() {
		writeError(w, apierr.Invalid("", "The request body could not be read."))
		return
	}
	e := upstreamError(err)
	if errors.Is(err, errRetriedOut) {
		w.Header().Set("X-Should-Retry", "false")
	}
	p.log.Warn("upstream request failed", "request_id", server.ExchangeOf(r.Context()).ID(), "status", e.Status, "error", err)
	writeError(w, e)
}

// upstreamError translates a failed upstream call into the gateway error the
// client gets: 503 for an open breaker, 504 for a timeout, else 502.
func upstreamError(err error) *apierr.Error {
	switch {
	case errors.Is(err, errBreakerOpen):
		return &apierr.Error{Status: http.StatusServiceUnavailable, Type: apierr.TypeUpstream, Code: "upstream_unavailable",
			Message: "The upstream API is failing; memgate's circuit breaker is open. Retry later."}
	case isTimeout(err):
		return &apierr.Error{Status: http.StatusGatewayTimeout, Type: apierr.TypeUpstream, Code: "upstream_timeout",
			Message: "The upstream API did not answer in time."}
	}
	return &apierr.Error{Status: http.StatusBadGateway, Type: apierr.TypeUpstream, Code: "upstream_error",
		Message: "The upstream API could not be reached."}
}

// timedBody records the upstream time when the response body is closed,
// and marks the exchange 502 when the upstream body broke (not when the
// client went away or shutdown cut the request: those are recorded by the
// server).
type timedBody struct {
	io.ReadCloser
	f   *forward
	ctx context.Context
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.ctx.Err() == nil {
		b.f.x.SetStatus(http.StatusBadGateway)
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.f.x.AddUpstream(time.Since(b.f.start))
	return b.ReadCloser.Close()
}

// finalWriter lets the reverse proxy relay the upstream's 1xx responses
// without echo taking the first one for the final status: the client then
// sees the real status that follows. The reverse proxy clears the header
// map after relaying a 1xx, and with it the gateway's own headers set
// before the upstream call (X-Request-Id, X-Memory-*): the final status
// puts them back, before the upstream's, as they stand without a 1xx. A
// 1xx goes without X-Memory-* and cookies (dropUpstreamOwn), as the final
// answer's upstream headers do.
//
// With a readOn (a memory-on stream), a write the client's hang-up failed
// tells it the client is gone; once it reads the upstream on, the writer
// discards what it is given (the client is gone) and flushes nothing.
type finalWriter struct {
	*echo.Response
	// own is the gateway's headers when the writer was made; relayed1xx
	// is set once a 1xx went out.
	own        http.Header
	relayed1xx bool
	readOn     *readOn
}

// newFinalWriter returns the writer the reverse proxy answers r through,
// once the gateway set its own headers; k is the exchange's readOn, or
// nil.
func newFinalWriter(r *echo.Response, k *readOn) *finalWriter {
	return &finalWriter{Response: r, own: r.Header().Clone(), readOn: k}
}

func (w *finalWriter) Write(p []byte) (int, error) {
	if w.readOn.reading() {
		w.readOn.overCap()
		return len(p), nil
	}
	n, err := w.Response.Write(p)
	if err != nil && w.readOn != nil && w.readOn.clientGone(context.Canceled) {
		w.readOn.overCap()
		return len(p), nil
	}
	return n, err
}

// Flush flushes the response, unless its client is gone (readOn).
func (w *finalWriter) Flush() {
	if !w.readOn.reading() {
		w.Response.Flush()
	}
}

func (w *finalWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// The reverse proxy put the upstream's 1xx headers beside the
		// gateway's: what only the gateway may say goes in neither (the
		// final status puts the gateway's own back).
		w.relayed1xx = true
		dropUpstreamOwn(w.Header())
		w.Response.Writer.WriteHeader(code)
		return
	}
	if w.relayed1xx {
		h := w.Header()
		for k, v := range w.own {
			h[k] = append(slices.Clip(v), h[k]...)
		}
	}
	w.Response.WriteHeader(code)
}

// copyPool holds the buffers used to relay response bodies.
var copyPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bufferPool adapts copyPool to httputil.BufferPool.
type bufferPool struct{}

func (bufferPool) Get() []byte  { return *copyPool.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyPool.Put(&b) }
