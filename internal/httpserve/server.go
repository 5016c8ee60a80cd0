// Package httpserve serves HTTP/1.1 to an http.Handler with one goroutine
// per connection and no helper goroutine per request.
//
// net/http's server starts a background read for every request whose body
// was read to the end (to notice a client that goes away) and tears it down
// when the handler returns. On a machine whose idle cores sleep, each of those
// hand-offs between threads costs tens of microseconds, which dominates a
// proxy's added latency at low concurrency. This server reads a request,
// runs the handler and writes the response on the connection's own goroutine,
// and only watches the connection for a disconnect once a handler has run
// longer than WatchAfter or has flushed (started streaming) — the requests
// for which a disconnect can matter.
//
// Its timeouts (idle, header, watch) are coarse.Timers, not connection
// deadlines or runtime timers: arming a runtime timer per request woke
// another thread per request. Reads and writes are raw system calls
// (rawconn) for the same reason.
//
// A request head of the plain shape almost every client sends, buffered
// whole, is parsed by this package (readRequest, through internal/wirehdr);
// every other is parsed by net/http (http.ReadRequest), and the fast parser
// takes only what http.ReadRequest parses to the same request (a fuzz test
// holds it to that), so header and body framing rules (chunked bodies,
// conflicting lengths, header syntax) are the standard library's. A
// response whose declared Content-Length is written in full is flushed at
// once, not when the handler returns. What it does not do: TLS, HTTP/2,
// Hijack, trailers and content sniffing (a response without Content-Type
// gets none).
package httpserve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/coarse"
	"github.com/memgate/memgate/internal/rawconn"
	"github.com/memgate/memgate/internal/wirehdr"
)

// Server serves HTTP/1.1 connections to Handler. Set the fields before
// Serve; zero fields take the defaults noted.
type Server struct {
	Handler http.Handler
	// BaseContext is the parent of every connection's context, and so of
	// every request's (default context.Background()).
	BaseContext context.Context
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing for
	// this long (default 120s).
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's line and headers (default 1 MiB);
	// larger ones get 431.
	MaxHeaderBytes int
	// WatchAfter is how long a handler runs before its connection is
	// watched for the client going away, which cancels the request's
	// context (default 5ms, up to the Clock's resolution later). A flush
	// starts the watch at once.
	WatchAfter time.Duration
	// Logger receives handler panics and connection errors (default: none).
	Logger *slog.Logger
	// Clock runs the connections' timeouts (default: a clock of the
	// server's own with 5ms resolution); they fire up to its resolution
	// late.
	Clock *coarse.Clock

	clockOnce sync.Once
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   atomic.Bool
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

func (s *Server) readHeaderTimeout() time.Duration {
	return orDefault(s.ReadHeaderTimeout, 10*time.Second)
}
func (s *Server) idleTimeout() time.Duration { return orDefault(s.IdleTimeout, 120*time.Second) }
func (s *Server) watchAfter() time.Duration  { return orDefault(s.WatchAfter, 5*time.Millisecond) }

func (s *Server) clock() *coarse.Clock {
	s.clockOnce.Do(func() {
		if s.Clock == nil {
			s.Clock = coarse.New(5 * time.Millisecond)
		}
	})
	return s.Clock
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Serve accepts connections on ln until Shutdown or Close, and returns
// ErrServerClosed then; any other accept error is returned at once.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln) {
		ln.Close()
		return ErrServerClosed
	}
	defer s.untrack(ln)
	s.clock()
	base := s.BaseContext
	if base == nil {
		base = context.Background()
	}
	var delay time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: back off as
				// net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logger().Warn("http accept error; retrying", "err", err, "delay", delay.String())
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, rwc, base)
		if !s.addConn(c) {
			c.cancel()
			rwc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) untrack(ln net.Listener) {
	s.mu.Lock()
	delete(s.listeners, ln)
	s.mu.Unlock()
}

func (s *Server) addConn(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections, and waits until every
// connection has finished its request in flight and closed, or ctx ends
// (then it returns ctx's error and leaves the rest running; Close cuts
// them).
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.closeListeners()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.rwc.Close()
	}
	return nil
}

func (s *Server) closeListeners() {
	s.closing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for ln := range s.listeners {
		ln.Close()
	}
}

// closeIdle closes the connections waiting for a request and reports
// whether none are left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.Load() == stateIdle {
			c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

// Connection states, for Shutdown.
const (
	stateIdle   int32 = iota // waiting for the first byte of a request
	stateActive              // reading a request or running its handler
)

// conn is one client connection.
type conn struct {
	srv *Server
	rwc net.Conn
	// ctx is the connection's context, a child of BaseContext and the
	// parent of its requests' contexts: a request registers with its
	// connection's context, not with the one BaseContext every
	// connection shares (whose lock each request took twice).
	ctx    context.Context
	cancel context.CancelFunc
	lr     *limitReader
	br     *bufio.Reader
	bw     *bufio.Writer
	state  atomic.Int32
	// remote is the client's address, formatted once.
	remote string
	// buf holds a response body whose length is not known yet; reused by
	// every request on the connection.
	buf []byte
	// deadline bounds the wait for a request (IdleTimeout) and for its
	// headers (ReadHeaderTimeout).
	deadline coarse.ReadTimeout
	// watchTimer starts the disconnect watch after WatchAfter.
	watchTimer coarse.Timer
}

// aLongTimeAgo is a read deadline that has passed: setting it interrupts a
// blocked read.
var aLongTimeAgo = time.Unix(1, 0)

func newConn(s *Server, rwc net.Conn, base context.Context) *conn {
	rwc = rawconn.Wrap(rwc)
	c := &conn{srv: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
	c.ctx, c.cancel = context.WithCancel(base)
	c.lr = &limitReader{r: rwc, n: noLimit}
	c.br = bufio.NewReaderSize(c.lr, 4<<10)
	c.bw = bufio.NewWriterSize(rwc, 4<<10)
	c.buf = make([]byte, 0, holdLimit)
	return c
}

// noLimit is the limitReader budget outside request headers.
const noLimit = 1<<62 - 1

// limitReader reads from r until n bytes were read, then reports
// errHeaderTooLarge.
type limitReader struct {
	r io.Reader
	n int64
}

var errHeaderTooLarge = errors.New("request headers too large")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

func (c *conn) serve() {
	defer func() {
		c.rwc.Close()
		c.srv.removeConn(c)
		c.cancel()
	}()
	for {
		c.state.Store(stateIdle)
		if c.srv.closing.Load() {
			return
		}
		// Wait for the next request for IdleTimeout, then give its
		// headers ReadHeaderTimeout.
		c.srv.clock().ArmRead(&c.deadline, c.rwc, c.srv.idleTimeout())
		if _, err := c.br.Peek(1); err != nil {
			c.deadline.Stop()
			return
		}
		c.state.Store(stateActive)
		if c.srv.closing.Load() && c.br.Buffered() == 0 {
			c.deadline.Stop()
			return
		}
		c.deadline.Reset(c.srv.readHeaderTimeout())
		c.lr.n = c.srv.maxHeaderBytes() + 4<<10 // bufio's look-ahead
		ctx, cancel := context.WithCancelCause(c.ctx)
		req, err := readRequest(ctx, c.br, c.srv.maxHeaderBytes())
		c.lr.n = noLimit
		if c.deadline.Stop() && err == nil {
			// The headers made it, but the connection's read deadline
			// has passed: it cannot be read again.
			err = os.ErrDeadlineExceeded
		}
		if err != nil {
			cancel(nil)
			c.reject(err)
			return
		}
		if !c.handle(req, cancel) {
			return
		}
	}
}

// reject answers a request that could not be parsed, as net/http would, and
// the connection is closed after it.
func (c *conn) reject(err error) {
	var status int
	var msg string
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.As(err, &ne) && ne.Timeout():
		return // the client went away or was too slow: nothing to answer
	case errors.Is(err, errHeaderTooLarge):
		status, msg = http.StatusRequestHeaderFieldsTooLarge, "request headers too large"
	default:
		status, msg = http.StatusBadRequest, "malformed HTTP request"
	}
	c.rwc.SetWriteDeadline(time.Now().Add(time.Second))
	c.bw.WriteString("HTTP/1.1 ")
	c.bw.WriteString(statusLine(status))
	c.bw.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: ")
	c.bw.WriteString(itoa(int64(len(msg))))
	c.bw.WriteString("\r\n\r\n")
	c.bw.WriteString(msg)
	c.bw.Flush()
}

// handle runs the handler for req, whose context cancel ends, and writes
// its response; it reports whether the connection may serve another
// request.
func (c *conn) handle(req *http.Request, cancel context.CancelCauseFunc) (keepAlive bool) {
	defer cancel(nil)
	if req.ProtoMajor != 1 {
		c.reject(errors.New("unsupported protocol version"))
		return false
	}
	if req.ProtoAtLeast(1, 1) && len(req.Header["Host"]) == 0 && req.Host == "" {
		c.reject(errors.New("missing required Host header"))
		return false
	}
	req.RemoteAddr = c.remote

	// The body reader and the response are new for every request, never
	// reused: a transport's goroutine may still hold the body (and read
	// it) after the handler returns. They share one allocation.
	ex := &exchange{
		body: bodyReader{rc: req.Body, c: c},
		w:    response{c: c, req: req, header: make(http.Header), contentLength: -1, buf: c.buf[:0]},
	}
	body, w := &ex.body, &ex.w
	if req.Body == http.NoBody || req.ContentLength == 0 {
		body.eof.Store(true)
	}
	if req.ProtoAtLeast(1, 1) && wirehdr.HasToken(req.Header["Expect"], "100-continue") {
		body.continueNeeded = true
		delete(req.Header, "Expect")
	}
	req.Body = body

	w.watch = watcher{c: c, body: body, cancel: cancel}
	body.watch = &w.watch
	c.srv.clock().Arm(&c.watchTimer, c.srv.watchAfter(), w.watch.start)

	panicked := c.run(w, req)
	c.watchTimer.Stop()
	gone := w.watch.stop()
	if panicked {
		// Like net/http: the connection is cut, the client sees an
		// aborted response.
		return false
	}
	w.finish()
	// The handler's reads of the body are over; a read still in progress
	// on another goroutine (a transport writing the body upstream) is
	// waited for by drain.
	body.closed.Store(true)
	if w.err != nil || gone || !body.drain(256<<10) {
		return false
	}
	return !w.closeAfter && !req.Close && !c.srv.closing.Load()
}

// exchange is the per-request state of a connection.
type exchange struct {
	body bodyReader
	w    response
}

// run calls the handler, recovering a panic (other than
// http.ErrAbortHandler) into a logged error.
func (c *conn) run(w *response, req *http.Request) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			if v != http.ErrAbortHandler {
				c.srv.logger().Error("http handler panicked", "method", req.Method, "path", req.URL.Path, "panic", v)
			}
		}
	}()
	c.srv.Handler.ServeHTTP(w, req)
	return false
}

// bodyReader is a request body that records when it was read to the end
// (from then on the connection's reader is free for the watcher) and sends
// 100 Continue before the first read when the client asked for it.
type bodyReader struct {
	// mu is held across every read of the connection for the body: the
	// handler's, a transport goroutine's that outlives the handler (a
	// reverse proxy writing the body upstream), and the server's drain
	// after the handler, which must not run beside another read.
	mu             sync.Mutex
	rc             io.ReadCloser
	c              *conn
	eof            atomic.Bool
	continueNeeded bool // guarded by mu
	closed         atomic.Bool
	// watch is started when the body ends if it was asked for earlier.
	watch *watcher
}

func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.continueNeeded {
		b.continueNeeded = false
		b.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := b.c.bw.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
		b.watch.bodyDone()
	}
	return n, err
}

// drain reads and discards what is left of the body, up to limit bytes,
// once a read in progress has returned, and reports whether the body ended
// within them, so that the connection can read its next request. A client
// that asked to continue and was never told to may or may not send its
// body: drain reports false for it.
func (b *bodyReader) drain(limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.continueNeeded:
		return false
	case b.eof.Load():
		return true
	}
	n, err := io.CopyN(io.Discard, b.rc, limit)
	return n < limit && errors.Is(err, io.EOF)
}

// Close marks the body closed; what is left unread is drained (or the
// connection closed) after the handler returns.
func (b *bodyReader) Close() error {
	b.closed.Store(true)
	return nil
}
