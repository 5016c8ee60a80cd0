package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// headSeeds are request heads of the shapes clients send and of the shapes
// parseHead must leave to net/http.
var headSeeds = []string{
	"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
	"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /v1/models?limit=3 HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\nx-memory-mode: off\r\n\r\n",
	"GET /a%20b HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\nConnection: keep-alive, close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nPragma: no-cache\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Tabs: \t v \t\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: x\r\n\r\n",
	"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\nabcdefg",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\nHost: x\n\n",
	"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-High: caf\xc3\xa9\r\n\r\n",
	"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
	"G@T / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n",
}

// TestParseHeadTakesPlainRequests checks which heads parseHead takes itself
// and what it makes of them.
func TestParseHeadTakesPlainRequests(t *testing.T) {
	tests := []struct {
		in     string
		taken  bool
		method string
		path   string
		host   string
		length int64
		close  bool
		header http.Header
	}{
		{in: headSeeds[0], taken: true, method: "POST", path: "/v1/chat/completions", host: "gw", length: 5,
			header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"5"}}},
		{in: headSeeds[2], taken: true, method: "GET", path: "/v1/models", host: "x",
			header: http.Header{"Accept-Encoding": {"gzip"}, "X-Memory-Mode": {"off"}}},
		{in: headSeeds[4], taken: true, method: "GET", path: "/", host: "x", close: true,
			header: http.Header{"X-A": {"1", "2"}, "Connection": {"keep-alive, close"}}},
		{in: headSeeds[5], taken: true, method: "GET", path: "/", host: "x",
			header: http.Header{"Pragma": {"no-cache"}, "Cache-Control": {"no-cache"}}},
		{in: headSeeds[6], taken: true, method: "GET", path: "/", host: "x",
			header: http.Header{"X-Empty": {""}, "X-Tabs": {"v"}}},
		{in: headSeeds[7]},  // two Host fields
		{in: headSeeds[8]},  // HTTP/1.0
		{in: headSeeds[9]},  // absolute form
		{in: headSeeds[11]}, // chunked
		{in: headSeeds[12]}, // repeated Content-Length
		{in: headSeeds[13]}, // signed length
		{in: headSeeds[15]}, // folded line
		{in: headSeeds[16]}, // bare LF
		{in: headSeeds[17]}, // space before the colon
		{in: headSeeds[18]}, // control byte in a value
		{in: headSeeds[22]}, // incomplete
	}
	for _, tt := range tests {
		t.Run(strings.SplitN(tt.in, "\r\n", 2)[0], func(t *testing.T) {
			req, n := parsedHead([]byte(tt.in))
			if (req != nil) != tt.taken {
				t.Fatalf("taken = %v, want %v", req != nil, tt.taken)
			}
			if req == nil {
				return
			}
			if want := strings.Index(tt.in, "\r\n\r\n") + 4; n != want {
				t.Errorf("n = %d, want %d", n, want)
			}
			if req.Method != tt.method || req.URL.Path != tt.path || req.Host != tt.host ||
				req.ContentLength != tt.length || req.Close != tt.close {
				t.Errorf("got %s %s host %q length %d close %v", req.Method, req.URL.Path, req.Host, req.ContentLength, req.Close)
			}
			if !reflect.DeepEqual(req.Header, tt.header) {
				t.Errorf("header = %v, want %v", req.Header, tt.header)
			}
		})
	}
}

// TestReadRequestBodies reads pipelined requests, parsed both ways, with
// their bodies.
func TestReadRequestBodies(t *testing.T) {
	in := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc" +
		"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n" +
		"GET /c HTTP/1.1\r\nHost: x\r\n\r\n"
	br := bufio.NewReader(strings.NewReader(in))
	for _, want := range []struct{ path, body string }{{"/a", "abc"}, {"/b", "de"}, {"/c", ""}} {
		req, err := readRequest(context.Background(), br, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", want.path, err)
		}
		b, err := io.ReadAll(req.Body)
		if err != nil || req.URL.Path != want.path || string(b) != want.body {
			t.Fatalf("got %s %q (%v), want %s %q", req.URL.Path, b, err, want.path, want.body)
		}
	}
	if _, err := readRequest(context.Background(), br, 1<<20); err != io.EOF {
		t.Fatalf("after the last request: %v, want EOF", err)
	}
}

// TestFixedBodyShort reports a body cut short as io.ErrUnexpectedEOF.
func TestFixedBodyShort(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"))
	req, err := readRequest(context.Background(), br, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if req.Body == http.NoBody || strings.Contains(fmt.Sprintf("%T", req.Body), "http.body") {
		t.Fatalf("body %T: the head was not parsed by parseHead", req.Body)
	}
	if b, err := io.ReadAll(req.Body); err != io.ErrUnexpectedEOF || string(b) != "abc" {
		t.Fatalf("got %q, %v; want \"abc\", unexpected EOF", b, err)
	}
}

// parsedHead is parseHead's request, nil when it left the head to
// http.ReadRequest.
func parsedHead(b []byte) (*http.Request, int) {
	var req http.Request
	n, ok := parseHead(b, &req)
	if !ok {
		return nil, 0
	}
	return &req, n
}

// FuzzParseHead holds parseHead to net/http: whatever it takes,
// http.ReadRequest must parse to the same request.
func FuzzParseHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, n := parsedHead(in)
		if got == nil {
			return
		}
		br := bufio.NewReader(bytes.NewReader(in))
		want, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("parseHead took %q, http.ReadRequest: %v", in, err)
		}
		if consumed := len(in) - br.Buffered(); want.ContentLength <= 0 && consumed != n {
			// With a body, ReadRequest's reader may have looked ahead.
			t.Fatalf("%q: parseHead spans %d bytes, ReadRequest read %d", in, n, consumed)
		}
		if got.Method != want.Method || got.RequestURI != want.RequestURI || got.Proto != want.Proto ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor || got.Host != want.Host ||
			got.ContentLength != want.ContentLength || got.Close != want.Close {
			t.Fatalf("%q:\n got %s %s %s host %q length %d close %v\nwant %s %s %s host %q length %d close %v", in,
				got.Method, got.RequestURI, got.Proto, got.Host, got.ContentLength, got.Close,
				want.Method, want.RequestURI, want.Proto, want.Host, want.ContentLength, want.Close)
		}
		if *got.URL != *want.URL {
			t.Fatalf("%q: URL %#v, want %#v", in, *got.URL, *want.URL)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("%q: header %v, want %v", in, got.Header, want.Header)
		}
	})
}
