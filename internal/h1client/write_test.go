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

// TestWriteRequestMatchesNetHTTP parses what writeRequest and req.Write
// put on the wire and compares the requests a server would see.
func TestWriteRequestMatchesNetHTTP(t *testing.T) {
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name   string
		method string
		url    string
		body   string
		// unknownLength sends the body with ContentLength -1 (chunked).
		unknownLength bool
		header        http.Header
		host          string
		close         bool
	}{
		{name: "chat post", method: "POST", url: "http://up:8080/v1/chat/completions", body: body,
			header: http.Header{"Authorization": {"Bearer sk"}, "Content-Type": {"application/json"}, "X-Multi": {"a", "b"}, "User-Agent": {"OpenAI/Python 1.0"}}},
		{name: "query and no user agent", method: "POST", url: "http://up/v1/chat/completions?api-version=2024-01-01", body: body,
			header: http.Header{"Content-Type": {"application/json"}}},
		{name: "newlines in a value", method: "POST", url: "http://up/v1/x", body: "x",
			header: http.Header{"X-Evil": {"a\r\nInjected: yes"}, "X-Padded": {"  v \t"}}},
		{name: "get without body", method: "GET", url: "http://up/v1/models", header: http.Header{"Accept": {"*/*"}}},
		{name: "post without body", method: "POST", url: "http://up/v1/x", header: http.Header{}},
		{name: "host override and close", method: "POST", url: "http://10.0.0.1/v1/x", body: "{}", host: "api.example",
			header: http.Header{"Content-Length": {"999"}, "Host": {"ignored"}}, close: true},
		{name: "two user agents", method: "POST", url: "http://up/v1/x", body: "{}", header: http.Header{"User-Agent": {"a", "b"}}},
		{name: "empty user agent", method: "POST", url: "http://up/v1/x", body: "{}", header: http.Header{"User-Agent": {""}}},
		{name: "unknown length goes chunked", method: "POST", url: "http://up/v1/x", body: body, unknownLength: true,
			header: http.Header{"Content-Type": {"application/json"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			build := func() *http.Request {
				var r io.Reader
				if tt.body != "" {
					r = strings.NewReader(tt.body)
					if tt.unknownLength {
						r = io.MultiReader(r) // hides the length
					}
				}
				req, err := http.NewRequest(tt.method, tt.url, r)
				if err != nil {
					t.Fatal(err)
				}
				req.Header = tt.header.Clone()
				req.Host = tt.host
				req.Close = tt.close
				return req
			}
			var ours, theirs bytes.Buffer
			bw := bufio.NewWriter(&ours)
			if err := writeRequest(bw, build()); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			if err := build().Write(&theirs); err != nil {
				t.Fatal(err)
			}
			got, want := parse(t, ours.Bytes()), parse(t, theirs.Bytes())
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("server sees\n%+v\nwant (req.Write)\n%+v\nwire:\n%s", got, want, ours.String())
			}
		})
	}
}

// seen is what a server reads of a request.
type seen struct {
	Method, URI, Host string
	Header            http.Header
	ContentLength     int64
	TransferEncoding  []string
	Close             bool
	Body              string
}

func parse(t *testing.T, wire []byte) seen {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(wire))
	r, err := http.ReadRequest(br)
	if err != nil {
		t.Fatalf("parse %q: %v", wire, err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if br.Buffered() != 0 {
		t.Fatalf("%d bytes after the request", br.Buffered())
	}
	return seen{r.Method, r.RequestURI, r.Host, r.Header, r.ContentLength, r.TransferEncoding, r.Close, string(b)}
}

func TestWriteRequestErrors(t *testing.T) {
	t.Run("short body", func(t *testing.T) {
		req, _ := http.NewRequest("POST", "http://up/v1/x", strings.NewReader("abc"))
		req.ContentLength = 10
		if err := writeRequest(bufio.NewWriter(io.Discard), req); err == nil {
			t.Fatal("a body shorter than its Content-Length was written")
		}
	})
	t.Run("bad header name", func(t *testing.T) {
		req, _ := http.NewRequest("POST", "http://up/v1/x", strings.NewReader("abc"))
		req.Header["Bad: Name\r\nX"] = []string{"v"}
		if err := writeRequest(bufio.NewWriter(io.Discard), req); err == nil {
			t.Fatal("a header name with a colon and CRLF was written")
		}
	})
}
