package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// start serves h on a loopback port until the test ends and returns the
// address and the server.
func start(t *testing.T, h http.Handler) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, WatchAfter: time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String(), s
}

// rawConn is a client connection that writes raw requests and parses
// responses with net/http's reader.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, raw string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
}

// read reads one response to a request of method and returns it with its
// whole body.
func (c *rawConn) read(t *testing.T, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the server closed the connection: nothing more
// to read, and EOF (or a reset, when the client was still sending).
func (c *rawConn) closed() bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.br.ReadByte()
	return err != nil && !isTimeout(err)
}

func TestResponses(t *testing.T) {
	big := strings.Repeat("x", 3*holdLimit)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	mux.HandleFunc("/length", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		io.WriteString(w, big)
	})
	mux.HandleFunc("/created", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "made")
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %s", r.Method, b)
	})
	addr, _ := start(t, mux)

	tests := []struct {
		name, request, method string
		status                int
		body                  string
		chunked               bool
		contentLength         int64
	}{
		{"small body gets a length", "GET /small HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, `{"ok":true}`, false, 11},
		{"long body of unknown length is chunked", "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, big, true, -1},
		{"handler's length is kept", "GET /length HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, big, false, int64(len(big))},
		{"status", "GET /created HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 201, "made", false, 4},
		{"204 has no body", "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 204, "", false, 0},
		{"HEAD has no body", "HEAD /small HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", 200, "", false, 11},
		{"body by length", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "POST", 200, "POST hello", false, 10},
		{"chunked request body", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n", "POST", 200, "POST hello", false, 10},
		{"unknown route", "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 404, "404 page not found\n", false, 19},
	}
	// Every case on one keep-alive connection: each response must be
	// framed exactly for the next one to parse.
	c := dial(t, addr)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.send(t, tt.request)
			resp, body := c.read(t, tt.method)
			if resp.StatusCode != tt.status || body != tt.body {
				t.Fatalf("got %d %.40q, want %d %.40q", resp.StatusCode, body, tt.status, tt.body)
			}
			if chunked := len(resp.TransferEncoding) > 0; chunked != tt.chunked {
				t.Errorf("chunked %v, want %v", chunked, tt.chunked)
			}
			if !tt.chunked && resp.ContentLength != tt.contentLength {
				t.Errorf("Content-Length %d, want %d", resp.ContentLength, tt.contentLength)
			}
			if resp.StatusCode == http.StatusNoContent && resp.Header.Get("Content-Length") != "" {
				t.Error("204 with a Content-Length")
			}
			if resp.Header.Get("Date") == "" {
				t.Error("no Date header")
			}
			if resp.Close {
				t.Error("server asked to close a keep-alive connection")
			}
		})
	}
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	c.send(t, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"/1", "/2", "/3"} {
		if _, body := c.read(t, "GET"); body != want {
			t.Fatalf("body %q, want %q", body, want)
		}
	}
}

func TestConnectionClose(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "bye")
	}))
	tests := []struct{ name, request string }{
		{"client asks", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
		{"HTTP/1.0 without keep-alive", "GET / HTTP/1.0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			c.send(t, tt.request)
			resp, body := c.read(t, "GET")
			if body != "bye" || !resp.Close {
				t.Fatalf("body %q close %v, want bye and close", body, resp.Close)
			}
			if !c.closed() {
				t.Fatal("server kept the connection open")
			}
		})
	}
	t.Run("HTTP/1.0 keep-alive", func(t *testing.T) {
		c := dial(t, addr)
		for range 2 {
			c.send(t, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			resp, body := c.read(t, "GET")
			if body != "bye" || resp.Close {
				t.Fatalf("body %q close %v, want bye, kept open", body, resp.Close)
			}
		}
	})
}

func TestBadRequests(t *testing.T) {
	called := false
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called = true }))
	tests := []struct {
		name, request string
		status        int
	}{
		{"garbage", "HELLO\r\n\r\n", 400},
		{"no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad header line", "GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		{"headers too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", http.DefaultMaxHeaderBytes+8<<10) + "\r\n\r\n", 431},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			go io.WriteString(c, tt.request) // may block on a huge request the server stops reading
			resp, _ := c.read(t, "GET")
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if !c.closed() {
				t.Fatal("connection left open after a bad request")
			}
		})
	}
	if called {
		t.Error("the handler ran for a bad request")
	}
}

func TestUnreadBodyIsDrained(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	c.send(t, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"/a", "/b"} {
		if _, body := c.read(t, "GET"); body != want {
			t.Fatalf("body %q, want %q", body, want)
		}
	}
}

func TestExpectContinue(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	c := dial(t, addr)
	c.send(t, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("got %v %v, want 100 Continue before the body is sent", resp, err)
	}
	c.send(t, "hello")
	if _, body := c.read(t, "POST"); body != "hello" {
		t.Fatalf("body %q", body)
	}
}

func TestFlushSendsBeforeHandlerReturns(t *testing.T) {
	release := make(chan struct{})
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		<-release
		io.WriteString(w, "data: 2\n\n")
	}))
	c := dial(t, addr)
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	// The handler is still blocked: this line can only arrive flushed.
	if line, err := br.ReadString('\n'); err != nil || line != "data: 1\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: 2\n\n" {
		t.Fatalf("rest %q %v", rest, err)
	}
	if len(resp.TransferEncoding) == 0 {
		t.Error("a flushed body of unknown length must be chunked")
	}
}

// TestCompleteBodyIsSentBeforeHandlerReturns: once a handler has written
// all of its declared Content-Length, the client has the whole response,
// whatever the handler does next.
func TestCompleteBodyIsSentBeforeHandlerReturns(t *testing.T) {
	release := make(chan struct{})
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "he")
		io.WriteString(w, "llo")
		<-release
	}))
	c := dial(t, addr)
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	// The handler is still blocked: the body can only be here if it was
	// sent when complete.
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "hello" {
		t.Fatalf("body %q %v", b, err)
	}
	close(release)
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := http.ReadResponse(c.br, &http.Request{Method: "GET"}); err != nil {
		t.Fatalf("second request on the connection: %v", err)
	}
}

func TestClientGoneCancelsRequest(t *testing.T) {
	// The handler reads the body (if any) and waits; the watch starts after
	// WatchAfter (1ms here), or at once when the body is read later.
	tests := []struct {
		name, request string
		readAfter     time.Duration
	}{
		{"no body", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"body read at once", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 0},
		{"body read after WatchAfter", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			causes := make(chan error, 1)
			read := make(chan struct{})
			addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(tt.readAfter)
				io.ReadAll(r.Body)
				close(read)
				select {
				case <-r.Context().Done():
					causes <- context.Cause(r.Context())
				case <-time.After(10 * time.Second):
					causes <- errors.New("the request was not cancelled")
				}
			}))
			c := dial(t, addr)
			c.send(t, tt.request)
			<-read
			c.Close()
			if err := <-causes; !errors.Is(err, errClientGone) {
				t.Fatalf("cause %v, want %v", err, errClientGone)
			}
		})
	}
}

// TestBaseContextEndCancelsRequests: request contexts carry BaseContext's
// values, and its end cancels the requests in flight (with its cause),
// also once Shutdown has closed the listener and Serve returned, and every
// later request from its start.
func TestBaseContextEndCancelsRequests(t *testing.T) {
	type key struct{}
	stopped := errors.New("shutting down")
	type seen struct {
		value any
		cause error
	}
	serve := func(base context.Context) (*Server, net.Listener, chan seen, chan error) {
		results := make(chan seen, 1)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{BaseContext: base, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush() // the client knows the request started
			select {
			case <-r.Context().Done():
				results <- seen{r.Context().Value(key{}), context.Cause(r.Context())}
			case <-time.After(10 * time.Second):
				results <- seen{r.Context().Value(key{}), errors.New("the request was not cancelled")}
			}
		})}
		done := make(chan error, 1)
		go func() { done <- s.Serve(ln) }()
		t.Cleanup(func() { s.Close() })
		return s, ln, results, done
	}
	check := func(got seen) {
		t.Helper()
		if got.value != "v" || !errors.Is(got.cause, stopped) {
			t.Errorf("value %v, cause %v; want v, %v", got.value, got.cause, stopped)
		}
	}

	base, cancelBase := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	defer cancelBase(nil)
	s, ln, results, done := serve(base)
	c := dial(t, ln.Addr().String())
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(c.br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("response head: %v", err)
	}
	// Shutdown closes the listener (Serve returns) and waits for the
	// request; the end of BaseContext must still reach it.
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- s.Shutdown(context.Background()) }()
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v, want ErrServerClosed", err)
	}
	cancelBase(stopped)
	check(<-results)
	if err := <-shutdownDone; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	// A request that starts after the end is cancelled from the start.
	_, ln, results, _ = serve(base)
	dial(t, ln.Addr().String()).send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	check(<-results)
}

func TestQuickRequestIsNotWatched(t *testing.T) {
	// A handler that returns before WatchAfter never starts the watcher,
	// and its context is only cancelled after it returned.
	ctxs := make(chan context.Context, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil {
			t.Error("context ended while the handler ran")
		}
		ctxs <- r.Context()
	}), WatchAfter: time.Hour}
	go s.Serve(ln)
	defer s.Close()
	c := dial(t, ln.Addr().String())
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read(t, "GET")
	if ctx := <-ctxs; !errors.Is(ctx.Err(), context.Canceled) || errors.Is(context.Cause(ctx), errClientGone) {
		t.Fatalf("after the response: err %v cause %v, want cancelled, not by the client", ctx.Err(), context.Cause(ctx))
	}
}

func TestPanicClosesOnlyItsConnection(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		io.WriteString(w, "fine")
	}))
	c := dial(t, addr)
	c.send(t, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	if !c.closed() {
		t.Fatal("connection open after a panic")
	}
	c2 := dial(t, addr)
	c2.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c2.read(t, "GET"); body != "fine" {
		t.Fatalf("body %q", body)
	}
}

func TestWriteBeyondContentLengthFails(t *testing.T) {
	errs := make(chan error, 1)
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, err := io.WriteString(w, "four")
		errs <- err
	}))
	c := dial(t, addr)
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := <-errs; !errors.Is(err, http.ErrContentLength) {
		t.Fatalf("err %v, want ErrContentLength", err)
	}
}

func TestShutdownWaitsForActiveAndClosesIdle(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()

	idle := dial(t, addr)
	idle.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.read(t, "GET")
	busy := dial(t, addr)
	busy.send(t, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	if !idle.closed() {
		t.Fatal("idle connection not closed by Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	close(release)
	resp, body := busy.read(t, "GET")
	if body != "done" || !resp.Close {
		t.Fatalf("in-flight response %q close %v, want done and close", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func TestShutdownGivesUpAtDeadline(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	addr, s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}))
	c := dial(t, addr)
	c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
	}
}

func TestTimeoutsCloseTheConnection(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tests := []struct {
		name string
		// send is what the client writes before it goes silent.
		send, want string
	}{
		{"idle after a request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "ok"},
		{"idle before any request", "", ""},
		{"headers never finish", "GET / HTTP/1.1\r\nHost: x\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{Handler: ok, IdleTimeout: 30 * time.Millisecond, ReadHeaderTimeout: 30 * time.Millisecond}
			go s.Serve(ln)
			t.Cleanup(func() { s.Close() })
			c := dial(t, ln.Addr().String())
			start := time.Now()
			if tt.send != "" {
				c.send(t, tt.send)
			}
			if tt.want != "" {
				if _, body := c.read(t, http.MethodGet); body != tt.want {
					t.Fatalf("body %q, want %q", body, tt.want)
				}
			}
			// closed waits up to 2s: far more than the timeout.
			if !c.closed() {
				t.Fatal("the server kept the silent connection open")
			}
			if took := time.Since(start); took < 30*time.Millisecond {
				t.Fatalf("closed after %v, before the 30ms timeout", took)
			}
		})
	}
}

func TestBusyConnectionOutlivesTheTimeouts(t *testing.T) {
	// A client that keeps sending requests, each well within the
	// timeouts, for several times their length is never cut off.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		IdleTimeout: 40 * time.Millisecond, ReadHeaderTimeout: 40 * time.Millisecond}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	c := dial(t, ln.Addr().String())
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		c.send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, body := c.read(t, http.MethodGet); body != "ok" {
			t.Fatalf("body %q", body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProxiedBodyLeftUnreadKeepsFraming: a reverse proxy whose upstream
// answers before reading the body leaves its transport reading the client's
// body after the handler returned. The server's drain must wait for that
// read and take the rest, so the next request on the connection is framed
// where the client put it (run under -race).
func TestProxiedBodyLeftUnreadKeepsFraming(t *testing.T) {
	// An upstream that answers the POST at once and reads nothing more of
	// that connection; GETs (on connections of their own) get their path.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	defer close(release)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				req, err := http.ReadRequest(bufio.NewReader(nc))
				if err != nil {
					return
				}
				if req.Method == http.MethodGet {
					body := "second " + req.URL.Path
					fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
					return
				}
				io.WriteString(nc, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
				<-release
			}()
		}
	}()
	target, _ := url.Parse("http://" + ln.Addr().String())
	addr, _ := start(t, httputil.NewSingleHostReverseProxy(target))
	c := dial(t, addr)
	const size = 64 << 10
	c.send(t, fmt.Sprintf("POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)+strings.Repeat("a", size/2))
	resp, err := http.ReadResponse(c.br, &http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("first: status %d, want 401", resp.StatusCode)
	}
	c.send(t, strings.Repeat("b", size/2)+"GET /second HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err = http.ReadResponse(c.br, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("second request on the connection: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "second /second" {
		t.Fatalf("second: %d %q, want 200 \"second /second\"", resp.StatusCode, b)
	}
}
