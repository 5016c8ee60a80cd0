package h1client

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// responseSeeds are response heads of the shapes upstreams send and of the
// shapes parseResponseHead must leave to net/http.
var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-Request-Id: up-1\r\n\r\n{}",
	"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\ncontent-length: 0\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nPragma: no-cache\r\nSet-Cookie: a\r\nSet-Cookie: b\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-Fold: a\r\n b\r\n\r\nx",
	"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
}

// TestParseResponseHead checks which heads parseResponseHead takes itself
// and what it makes of them.
func TestParseResponseHead(t *testing.T) {
	tests := []struct {
		in     string
		taken  bool
		status string
		length int64
		close  bool
		header http.Header
	}{
		{in: responseSeeds[0], taken: true, status: "200 OK", length: 2,
			header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"2"}, "X-Request-Id": {"up-1"}}},
		{in: responseSeeds[1], taken: true, status: "429 Too Many Requests",
			header: http.Header{"Retry-After": {"1"}, "Content-Length": {"0"}}},
		{in: responseSeeds[2], taken: true, status: "200", close: true, header: http.Header{"Content-Length": {"0"}}},
		{in: responseSeeds[3], taken: true, status: "200 OK", length: 1,
			header: http.Header{"Content-Length": {"1"}, "Pragma": {"no-cache"}, "Cache-Control": {"no-cache"}, "Set-Cookie": {"a", "b"}}},
		{in: responseSeeds[4]},  // chunked
		{in: responseSeeds[5]},  // read to the end
		{in: responseSeeds[6]},  // 204
		{in: responseSeeds[7]},  // 1xx
		{in: responseSeeds[8]},  // HTTP/1.0
		{in: responseSeeds[9]},  // two lengths
		{in: responseSeeds[10]}, // folded
		{in: responseSeeds[11]}, // four-digit status
		{in: responseSeeds[12]}, // incomplete
	}
	req := &http.Request{Method: http.MethodPost}
	for _, tt := range tests {
		t.Run(strings.SplitN(tt.in, "\r\n", 2)[0], func(t *testing.T) {
			resp, n := parseResponseHead([]byte(tt.in), req)
			if (resp != nil) != tt.taken {
				t.Fatalf("taken = %v, want %v", resp != nil, tt.taken)
			}
			if resp == nil {
				return
			}
			if want := strings.Index(tt.in, "\r\n\r\n") + 4; n != want {
				t.Errorf("n = %d, want %d", n, want)
			}
			if resp.Status != tt.status || resp.ContentLength != tt.length || resp.Close != tt.close || resp.Request != req {
				t.Errorf("got %q length %d close %v", resp.Status, resp.ContentLength, resp.Close)
			}
			if !reflect.DeepEqual(resp.Header, tt.header) {
				t.Errorf("header = %v, want %v", resp.Header, tt.header)
			}
		})
	}
	if resp, _ := parseResponseHead([]byte(responseSeeds[0]), &http.Request{Method: http.MethodHead}); resp != nil {
		t.Error("took the answer to a HEAD request")
	}
}

// TestReadResponseBodies reads responses parsed both ways, with their
// bodies, from one connection's bytes.
func TestReadResponseBodies(t *testing.T) {
	br := bufio.NewReader(strings.NewReader(responseSeeds[0] + responseSeeds[4] + responseSeeds[3]))
	for _, want := range []string{"{}", "", "x"} {
		resp, err := readResponse(br, &http.Request{Method: http.MethodPost})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != want {
			t.Fatalf("body %q (%v), want %q", b, err, want)
		}
	}
}

// FuzzParseResponseHead holds parseResponseHead to net/http: whatever it
// takes, http.ReadResponse must parse to the same response.
func FuzzParseResponseHead(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		req := &http.Request{Method: http.MethodPost}
		if head {
			req.Method = http.MethodHead
		}
		got, n := parseResponseHead(in, req)
		if got == nil {
			return
		}
		br := bufio.NewReader(bytes.NewReader(in))
		want, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("parseResponseHead took %q, http.ReadResponse: %v", in, err)
		}
		if consumed := len(in) - br.Buffered(); want.ContentLength == 0 && consumed != n {
			t.Fatalf("%q: parseResponseHead spans %d bytes, ReadResponse read %d", in, n, consumed)
		}
		if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
			got.ContentLength != want.ContentLength || got.Close != want.Close ||
			len(want.TransferEncoding) != 0 || want.Trailer != nil || want.Uncompressed {
			t.Fatalf("%q:\n got %q %s length %d close %v\nwant %q %s length %d close %v te %v", in,
				got.Status, got.Proto, got.ContentLength, got.Close,
				want.Status, want.Proto, want.ContentLength, want.Close, want.TransferEncoding)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("%q: header %v, want %v", in, got.Header, want.Header)
		}
	})
}
