package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, &conns
}

func post(t *testing.T, tr *Transport, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return tr.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	resp.Body.Close()
	return string(b)
}

func TestBodiesAndReuse(t *testing.T) {
	big := strings.Repeat("y", 40<<10)
	ts, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "7")
			io.WriteString(w, "content")
		case "/chunked":
			w.Write([]byte(big)) // too long to be held: net/http chunks it
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				io.WriteString(w, "data: "+string(rune('a'+i))+"\n\n")
				w.(http.Flusher).Flush()
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Write(in)
		}
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	tests := []struct{ path, body, want string }{
		{"/length", "", "content"},
		{"/chunked", "", big},
		{"/stream", "", "data: a\n\ndata: b\n\ndata: c\n\n"},
		{"/empty", "", ""},
		{"/echo", `{"model":"m"}`, `{"model":"m"}`},
	}
	for range 2 {
		for _, tt := range tests {
			resp, err := post(t, tr, context.Background(), ts.URL+tt.path, tt.body)
			if err != nil {
				t.Fatalf("%s: %v", tt.path, err)
			}
			if got := readAll(t, resp); got != tt.want {
				t.Fatalf("%s: body %.40q, want %.40q", tt.path, got, tt.want)
			}
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for sequential requests read to the end, want 1", n)
	}
}

// TestClosedBodyReuse: a body closed before its end takes its connection
// with it; a body whose last bytes were read counts as complete even when
// the caller closes it without reading the io.EOF that would follow.
func TestClosedBodyReuse(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		chunked   bool // no Content-Length: http.ReadResponse's path
		read      int  // bytes read before Close
		wantConns int32
	}{
		{"closed half-read", strings.Repeat("z", 64<<10), false, 10, 2},
		{"closed half-read, chunked", strings.Repeat("z", 64<<10), true, 10, 2},
		{"closed after its last bytes", "abc", false, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(tt.body)))
				}
				io.WriteString(w, tt.body)
			})
			tr := &Transport{}
			defer tr.CloseIdleConnections()
			for range 2 {
				resp, err := post(t, tr, context.Background(), ts.URL, "{}")
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, tt.read)
				if n, err := io.ReadFull(resp.Body, buf); err != nil || string(buf[:n]) != tt.body[:tt.read] {
					t.Fatalf("read %q, %v", buf[:n], err)
				}
				resp.Body.Close()
				if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
					t.Fatal("read after Close succeeded")
				}
			}
			if n := conns.Load(); n != tt.wantConns {
				t.Fatalf("%d connections, want %d", n, tt.wantConns)
			}
		})
	}
}

// oneShotServer answers each connection's first request and then closes it
// without saying so, like a server whose keep-alive timeout passed while
// the connection sat in the client's pool.
func oneShotServer(t *testing.T) (url string, requests *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	requests = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				body, _ := io.ReadAll(req.Body)
				requests.Add(1)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+string(body))
			}()
		}
	}()
	return "http://" + ln.Addr().String(), requests
}

func TestStalePooledConnectionIsRetriedOnce(t *testing.T) {
	url, requests := oneShotServer(t)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for i, body := range []string{"first", "second", "third"} {
		resp, err := post(t, tr, context.Background(), url, body)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := readAll(t, resp); got != body {
			t.Fatalf("request %d: body %q, want %q (the replayed body)", i, got, body)
		}
		time.Sleep(10 * time.Millisecond) // let the server close the pooled connection
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("server handled %d requests, want 3 (each once)", n)
	}

	// A body that cannot be replayed is not sent twice: the caller gets
	// the error.
	resp, err := post(t, tr, context.Background(), url, "warm")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	time.Sleep(10 * time.Millisecond)
	req, _ := http.NewRequest(http.MethodPost, url, io.NopCloser(bytes.NewReader([]byte("once"))))
	req.ContentLength = 4
	if _, err := tr.RoundTrip(req); !errors.Is(err, errStale) {
		t.Fatalf("err %v, want errStale for a body without GetBody", err)
	}
}

func TestCancelWhileWaitingForHeaders(t *testing.T) {
	entered := make(chan struct{})
	ts, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // net/http watches for the client leaving only after the body
		close(entered)
		<-r.Context().Done()
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("client left")
	go func() {
		<-entered
		cancel(cause)
	}()
	if _, err := post(t, tr, ctx, ts.URL, "{}"); !errors.Is(err, cause) {
		t.Fatalf("err %v, want the context's cause", err)
	}
}

func TestCancelMidBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-release
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancelCause(context.Background())
	resp, err := post(t, tr, ctx, ts.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "data: 1\n" {
		t.Fatalf("first line %q", line)
	}
	cause := errors.New("idle")
	cancel(cause)
	if _, err := io.ReadAll(br); !errors.Is(err, cause) {
		t.Fatalf("read after cancel: %v, want the cause", err)
	}
}

func TestResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	tr := &Transport{ResponseHeaderTimeout: 20 * time.Millisecond}
	defer tr.CloseIdleConnections()
	_, err := post(t, tr, context.Background(), ts.URL, "{}")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err %v, want a timeout", err)
	}
}

func TestInformationalResponsesAreSkipped(t *testing.T) {
	ts, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</x>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "final")
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != "final" {
		t.Fatalf("got %d %q, want 200 final", resp.StatusCode, got)
	}
}

func TestRejectsHTTPS(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	if _, err := (&Transport{}).RoundTrip(req); !errors.Is(err, ErrScheme) {
		t.Fatalf("err %v, want ErrScheme", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := post(t, &Transport{}, context.Background(), "http://"+addr, "{}"); err == nil {
		t.Fatal("no error from a closed port")
	}
}

func TestBodyIdleTimeout(t *testing.T) {
	t.Run("silence fails the read and closes the connection", func(t *testing.T) {
		gone := make(chan struct{})
		ts, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/next" {
				io.WriteString(w, "ok")
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(gone)
		})
		tr := &Transport{BodyIdleTimeout: 30 * time.Millisecond}
		defer tr.CloseIdleConnections()
		resp, err := post(t, tr, context.Background(), ts.URL, "{}")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read %q, err %v; want a timeout", b, err)
		}
		if string(b) != "data: 1\n\n" {
			t.Errorf("read %q before the timeout", b)
		}
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("the server never saw the connection close")
		}
		resp, err = post(t, tr, context.Background(), ts.URL+"/next", "{}")
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "ok" || conns.Load() != 2 {
			t.Fatalf("next request: %q on connection %d, want ok on a new one (2)", got, conns.Load())
		}
	})
	t.Run("a body that keeps coming outlives it", func(t *testing.T) {
		ts, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
			for i := range 6 {
				if i > 0 {
					time.Sleep(15 * time.Millisecond)
				}
				io.WriteString(w, strconv.Itoa(i))
				w.(http.Flusher).Flush()
			}
		})
		tr := &Transport{BodyIdleTimeout: 60 * time.Millisecond}
		defer tr.CloseIdleConnections()
		for range 2 {
			resp, err := post(t, tr, context.Background(), ts.URL, "{}")
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, resp); got != "012345" {
				t.Fatalf("body %q, want 012345", got)
			}
		}
		if n := conns.Load(); n != 1 {
			t.Fatalf("%d connections, want 1 (the first reused)", n)
		}
	})
}
