// Package h1client is an http.RoundTripper for plain-HTTP/1.1 upstreams
// that writes each request and reads its response on the caller's
// goroutine, from a pool of keep-alive connections.
//
// net/http's Transport runs a read loop and a write loop goroutine per
// connection and hands every request and response between them and the
// caller over channels. On a machine whose idle cores sleep, those hand-offs
// cost tens of microseconds per request, which is most of what a gateway in
// front of a local model server adds. This transport has no goroutine per
// connection: a cancelled context interrupts the connection through a
// deadline (context.AfterFunc), and a pooled connection the server closed
// while idle is noticed on use and the request sent once more on a new one.
// Reads and writes are raw system calls (rawconn), and the response header
// timeout is a coarse.Timer rather than a connection deadline, so a request
// arms no runtime timer: each of those woke another thread.
//
// Response heads of the plain shape upstreams send (a Content-Length body)
// are parsed by readResponse through internal/wirehdr; every other by
// http.ReadResponse. A response body's silences can be bounded too
// (BodyIdleTimeout), on the same coarse read timeout.
//
// What it does not do, by design: TLS, HTTP/2, proxies, compression,
// 1xx-informational handling beyond skipping them, and protocol upgrades.
// Use net/http's Transport for those (memgate does, for https upstreams).
package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/coarse"
	"github.com/memgate/memgate/internal/rawconn"
)

// Transport is the RoundTripper. Set the fields before use; zero fields
// take the defaults noted.
type Transport struct {
	// DialTimeout bounds connecting (default 5s).
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response's headers
	// once the request is written (0: none); it fires up to the Clock's
	// resolution late.
	ResponseHeaderTimeout time.Duration
	// BodyIdleTimeout bounds the silence while a response body is read:
	// a body from which no byte arrives for this long fails with a timeout
	// error and its connection is closed (0: none). It fires up to the
	// Clock's resolution late, and counts from the last byte that arrived,
	// whether or not the caller was reading then.
	BodyIdleTimeout time.Duration
	// Clock runs ResponseHeaderTimeout and BodyIdleTimeout (default: a
	// clock of the transport's own with 5ms resolution).
	Clock *coarse.Clock
	// MaxIdleConnsPerHost caps the idle pool of each host (default 100).
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a pooled connection unused for this long
	// (default 90s).
	IdleConnTimeout time.Duration

	clockOnce sync.Once
	mu        sync.Mutex
	idle      map[string][]*conn
}

func (t *Transport) clock() *coarse.Clock {
	t.clockOnce.Do(func() {
		if t.Clock == nil {
			t.Clock = coarse.New(5 * time.Millisecond)
		}
	})
	return t.Clock
}

// conn is one keep-alive connection to a host.
type conn struct {
	nc        net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	host      string
	idleSince time.Time
	// readTimeout bounds the wait for the response headers, then the
	// silences of its body.
	readTimeout coarse.ReadTimeout
}

// ErrScheme is returned for a request this transport cannot send.
var ErrScheme = errors.New("h1client: only http:// URLs are supported")

// RoundTrip sends req and returns its response, whose body the caller must
// read to the end or close (the connection is reused only after a complete
// read). A request sent on a pooled connection that turns out to have been
// closed by the server before it answered anything is sent again on a new
// connection, when its body can be replayed (GetBody, or no body).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "http" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, ErrScheme
	}
	ctx := req.Context()
	host := req.URL.Host
	if req.URL.Port() == "" {
		host = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	for attempt := 0; ; attempt++ {
		c, reused := t.get(host)
		if c == nil {
			var err error
			if c, err = t.dial(ctx, host); err != nil {
				if req.Body != nil {
					req.Body.Close()
				}
				return nil, err
			}
		}
		resp, err := t.exchange(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		c.nc.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if !reused || attempt > 0 || !errors.Is(err, errStale) {
			return nil, err
		}
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// errStale marks a failure on a connection that delivered no byte of the
// response: the server closed it while it sat in the pool.
var errStale = errors.New("h1client: connection closed by the server before it answered")

// exchange writes req on c and reads the response headers.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	if err := writeRequest(c.bw, req); err != nil {
		stop()
		return nil, stale(fmt.Errorf("write request: %w", err))
	}
	if err := c.bw.Flush(); err != nil {
		stop()
		return nil, stale(fmt.Errorf("write request: %w", err))
	}
	if t.ResponseHeaderTimeout > 0 {
		t.clock().ArmRead(&c.readTimeout, c.nc, t.ResponseHeaderTimeout)
	}
	// The first byte tells a stale pooled connection (nothing ever
	// arrives) from a response that breaks off.
	if _, err := c.br.Peek(1); err != nil {
		c.readTimeout.Stop()
		stop()
		if isTimeout(err) && ctx.Err() == nil {
			return nil, &timeoutError{"h1client: timeout awaiting response headers"}
		}
		return nil, stale(fmt.Errorf("read response: %w", err))
	}
	var resp *http.Response
	for {
		var err error
		resp, err = readResponse(c.br, req)
		if err != nil {
			c.readTimeout.Stop()
			stop()
			if isTimeout(err) && ctx.Err() == nil {
				return nil, &timeoutError{"h1client: timeout awaiting response headers"}
			}
			return nil, fmt.Errorf("read response: %w", err)
		}
		// 1xx answers (100 Continue, 103 Early Hints) precede the real one.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	if c.readTimeout.Stop() {
		// It fired as the headers arrived: the connection's read
		// deadline has passed, so the body could not be read.
		stop()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &timeoutError{"h1client: timeout awaiting response headers"}
	}
	b := &body{rc: resp.Body, c: c, t: t, ctx: ctx, stop: stop, reusable: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.release(true)
	} else {
		// A body buffered whole already cannot fall silent: its reads
		// never reach the connection.
		if t.BodyIdleTimeout > 0 && (resp.ContentLength < 0 || int64(c.br.Buffered()) < resp.ContentLength) {
			b.idle = true
			t.clock().ArmRead(&c.readTimeout, c.nc, t.BodyIdleTimeout)
		}
		resp.Body = b
	}
	return resp, nil
}

// stale wraps err, a failure before any byte of the response arrived, with
// errStale when it is the connection's end (EOF, reset, broken pipe), not
// a timeout.
func stale(err error) error {
	if isTimeout(err) {
		return err
	}
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

func (t *Transport) dial(ctx context.Context, host string) (*conn, error) {
	d := net.Dialer{Timeout: orDefault(t.DialTimeout, 5*time.Second), KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	nc = rawconn.Wrap(nc)
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 16<<10), host: host}, nil
}

// get takes the most recently used idle connection to host, closing the
// ones idle too long.
func (t *Transport) get(host string) (c *conn, reused bool) {
	maxIdle := orDefault(t.IdleConnTimeout, 90*time.Second)
	t.mu.Lock()
	defer t.mu.Unlock()
	pool := t.idle[host]
	defer func() {
		if t.idle != nil {
			t.idle[host] = pool
		}
	}()
	for len(pool) > 0 {
		c = pool[len(pool)-1]
		pool[len(pool)-1] = nil
		pool = pool[:len(pool)-1]
		if time.Since(c.idleSince) < maxIdle {
			return c, true
		}
		c.nc.Close()
	}
	return nil, false
}

// put returns c to the pool, or closes it when the pool is full.
func (t *Transport) put(c *conn) {
	limit := t.MaxIdleConnsPerHost
	if limit <= 0 {
		limit = 100
	}
	c.idleSince = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*conn)
	}
	if len(t.idle[c.host]) < limit {
		t.idle[c.host] = append(t.idle[c.host], c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
}

// CloseIdleConnections closes every pooled connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, pool := range idle {
		for _, c := range pool {
			c.nc.Close()
		}
	}
}

// body is a response body that returns its connection to the pool when
// read to the end, and closes it otherwise.
type body struct {
	mu       sync.Mutex
	rc       io.ReadCloser
	c        *conn
	t        *Transport
	ctx      context.Context
	stop     func() bool
	reusable bool
	// idle reports that c.readTimeout runs BodyIdleTimeout.
	idle bool
	// ended reports that the last bytes were returned: the next Read
	// reports io.EOF.
	ended bool
	done  bool
	err   error
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	if b.ended {
		b.release(true)
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF && n > 0 {
		// The end came with the last bytes: they go to the caller first,
		// and the connection is released on the next Read (or Close),
		// once the caller has passed them on — a proxy's client gets its
		// answer without waiting for the pool's bookkeeping.
		b.ended, err = true, nil
	}
	if b.idle && n > 0 && err == nil {
		b.c.readTimeout.Reset(b.t.BodyIdleTimeout)
	}
	switch {
	case err == io.EOF:
		b.release(true)
	case err != nil:
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx)
		} else if b.idle && b.c.readTimeout.Stop() {
			err = &timeoutError{"h1client: response body idle for longer than " + b.t.BodyIdleTimeout.String()}
		}
		b.err = err
		b.release(false)
	}
	return n, err
}

// Close discards the connection unless the body was read to its end.
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.err = errors.New("h1client: read on closed response body")
		b.release(b.ended)
	}
	return nil
}

func (b *body) release(complete bool) {
	b.done = true
	if b.idle && b.c.readTimeout.Stop() {
		// Its deadline has passed: the connection cannot be read again.
		complete = false
	}
	// stop reports false when the context's deadline trick already ran:
	// the connection's deadline is poisoned.
	if b.stop() && complete && b.reusable && b.c.br.Buffered() == 0 {
		b.t.put(b.c)
		return
	}
	b.c.nc.Close()
}

// timeoutError is a net.Error that reports a timeout.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
