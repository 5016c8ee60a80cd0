package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/wirehdr"
)

// holdLimit is how much of a response body of unknown length is held back
// so that it can be sent with a Content-Length; a longer body, or one that
// is flushed, goes out chunked.
const holdLimit = 4 << 10

// response is the http.ResponseWriter (and http.Flusher) of one request.
type response struct {
	c      *conn
	req    *http.Request
	header http.Header

	status      int
	wroteHeader bool // WriteHeader ran (status is final)
	headerSent  bool // the status line and headers are on the wire
	// contentLength is the handler's Content-Length, -1 when it set none.
	contentLength int64
	written       int64
	chunked       bool
	buf           []byte
	closeAfter    bool
	err           error // the first write error; every later write fails

	watch watcher
}

// Header returns the response headers, to be set before WriteHeader.
func (w *response) Header() http.Header { return w.header }

// WriteHeader records the status. 1xx statuses are sent at once.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("httpserve: invalid WriteHeader code %v", code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	// Canonical keys are looked up directly, as net/http's server does:
	// Header.Get would canonicalize each of them again.
	if cl := wirehdr.Value(w.header, "Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		} else {
			delete(w.header, "Content-Length")
		}
	}
}

func (w *response) writeInformational(code int) {
	bw := w.c.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(statusLine(code))
	bw.WriteString("\r\n")
	w.header.Write(bw)
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
}

// Write sends (or holds) body bytes.
func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLength >= 0 && w.written+int64(len(p)) > w.contentLength {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	if !w.headerSent {
		if w.contentLength < 0 && len(w.buf)+len(p) <= holdLimit {
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		w.sendHeader()
		w.writeBody(w.buf)
		w.buf = w.buf[:0]
	}
	w.writeBody(p)
	if w.written == w.contentLength && w.err == nil {
		// The body is complete: it goes out now rather than when the
		// handler returns, so what the handler does after its last write
		// (metrics, logs, releasing an upstream connection) is not part of
		// the client's wait.
		if err := w.c.bw.Flush(); err != nil {
			w.err = err
		}
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// WriteString is Write without the conversion.
func (w *response) WriteString(s string) (int, error) {
	// Small strings are the common case (JSON error bodies); the copy is
	// cheaper than the interface juggling to avoid it.
	return w.Write([]byte(s))
}

// FlushError sends what was written so far to the client (the header
// first, the body chunked when its length is unknown) and starts watching
// for the client going away: a flushed response is a stream.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return w.err
	}
	if !w.headerSent {
		w.sendHeader()
		w.writeBody(w.buf)
		w.buf = w.buf[:0]
	}
	if err := w.c.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	w.watch.start()
	return w.err
}

// Flush is FlushError for http.Flusher.
func (w *response) Flush() { w.FlushError() }

// sendHeader writes the status line and headers, choosing the framing:
// the handler's Content-Length, else chunked (HTTP/1.1), else close the
// connection after the body (HTTP/1.0).
func (w *response) sendHeader() {
	w.headerSent = true
	h := w.header
	delete(h, "Transfer-Encoding")
	if wirehdr.HasToken(h["Connection"], "close") {
		w.closeAfter = true
	}
	delete(h, "Connection")
	hasBody := bodyAllowed(w.status) && w.req.Method != http.MethodHead
	if !bodyAllowed(w.status) {
		delete(h, "Content-Length")
	}
	if hasBody && w.contentLength < 0 {
		if w.req.ProtoAtLeast(1, 1) {
			w.chunked = true
		} else {
			w.closeAfter = true
		}
	}
	if w.c.srv.closing.Load() {
		w.closeAfter = true
	}
	bw := w.c.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(statusLine(w.status))
	bw.WriteString("\r\n")
	if _, ok := h["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.WriteString(httpDate())
		bw.WriteString("\r\n")
	}
	wirehdr.Write(bw, h, nil) // fields with invalid names are dropped, as net/http does
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	switch {
	case w.closeAfter || w.req.Close:
		bw.WriteString("Connection: close\r\n")
	case !w.req.ProtoAtLeast(1, 1):
		bw.WriteString("Connection: keep-alive\r\n")
	}
	bw.WriteString("\r\n")
}

func (w *response) writeBody(p []byte) {
	if len(p) == 0 || w.err != nil {
		return
	}
	bw := w.c.bw
	if w.chunked {
		bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		bw.WriteString("\r\n")
	}
	if _, err := bw.Write(p); err != nil {
		w.err = err
		return
	}
	if w.chunked {
		bw.WriteString("\r\n")
	}
}

// finish completes the response after the handler returned: a held body
// goes out with its length, a chunked one gets its last chunk.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headerSent {
		if w.contentLength < 0 && bodyAllowed(w.status) && (w.req.Method != http.MethodHead || w.written > 0) {
			w.contentLength = w.written
			w.header["Content-Length"] = []string{strconv.FormatInt(w.written, 10)}
		}
		w.sendHeader()
		w.writeBody(w.buf)
	} else if w.chunked && w.err == nil {
		w.c.bw.WriteString("0\r\n\r\n")
	}
	if w.contentLength >= 0 && w.written < w.contentLength && w.req.Method != http.MethodHead {
		// The handler promised more than it wrote: the client can only
		// tell by the connection closing.
		w.closeAfter = true
	}
	if err := w.c.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	w.buf = nil
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// errClientGone is the cause of a request context cancelled because the
// client closed its connection.
var errClientGone = errors.New("client closed the connection")

// watcher reads from an idle connection while a long handler runs, to
// cancel the request when the client goes away. It starts when asked (by
// the WatchAfter timer or a flush) once the request body was read to its
// end — before that, the handler owns the connection's reader.
type watcher struct {
	c      *conn
	body   *bodyReader
	cancel context.CancelCauseFunc

	mu                          sync.Mutex
	requested, started, stopped bool
	done                        chan struct{}
	gone                        atomic.Bool
}

// start asks for the watch, which begins now if the body has ended.
func (w *watcher) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requested = true
	w.begin()
}

// bodyDone begins a watch asked for before the body ended.
func (w *watcher) bodyDone() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.requested {
		w.begin()
	}
}

func (w *watcher) begin() {
	if w.started || w.stopped || !w.body.eof.Load() {
		return
	}
	w.started = true
	w.done = make(chan struct{})
	go w.run()
}

func (w *watcher) run() {
	defer close(w.done)
	// Peek consumes nothing: a pipelined next request stays buffered.
	_, err := w.c.br.Peek(1)
	if err == nil {
		return
	}
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	if stopped && isTimeout(err) {
		return // stop's deadline, not the client
	}
	w.gone.Store(true)
	w.cancel(errClientGone)
}

// stop ends the watch and reports whether the client went away.
func (w *watcher) stop() bool {
	w.mu.Lock()
	w.stopped = true
	started := w.started
	w.mu.Unlock()
	if !started {
		return false
	}
	w.c.rwc.SetReadDeadline(aLongTimeAgo)
	<-w.done
	w.c.rwc.SetReadDeadline(time.Time{})
	return w.gone.Load()
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// statusLines holds "code text" for the codes net/http knows.
var statusLines = func() map[int]string {
	m := make(map[int]string)
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = strconv.Itoa(code) + " " + t
		}
	}
	return m
}()

func statusLine(code int) string {
	if s, ok := statusLines[code]; ok {
		return s
	}
	return strconv.Itoa(code) + " status code " + strconv.Itoa(code)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// dateCache is the Date header of the current second.
var dateCache atomic.Pointer[cachedDate]

type cachedDate struct {
	sec int64
	s   string
}

func httpDate() string {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.sec == now.Unix() {
		return d.s
	}
	d := &cachedDate{sec: now.Unix(), s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}
