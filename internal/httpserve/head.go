package httpserve

import (
	"bufio"
	"context"
	"net/http"
	"net/url"

	"github.com/memgate/memgate/internal/wirehdr"
)

// readRequest reads the next request from br. A request whose line and
// header fields are already buffered whole, and are of the plain shape
// almost every client sends, is parsed here (parseHead); any other — split
// across reads, HTTP/1.0, chunked or with a Transfer-Encoding, folded or
// duplicated framing fields, anything unusual — is left to net/http's
// http.ReadRequest, which then reads it from the same bytes.
//
// Why: http.ReadRequest builds its header through textproto's general
// reader and parses every target as a URL; at one request in flight that
// was the largest single share of the gateway's own CPU time. parseHead
// takes only what http.ReadRequest parses to the same *http.Request
// (FuzzParseHead holds it to that), so the wire rules stay net/http's.
func readRequest(ctx context.Context, br *bufio.Reader, maxHeaderBytes int64) (*http.Request, error) {
	var req http.Request
	if n, ok := parseHead(wirehdr.Buffered(br), &req); ok && int64(n) <= maxHeaderBytes {
		br.Discard(n)
		req.Body = wirehdr.Body(br, req.ContentLength)
		// The one allocation of the request: req itself stays on the
		// stack.
		return req.WithContext(ctx), nil
	}
	r, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	return r.WithContext(ctx), nil
}

// parseHead parses the request line and header fields at the start of b
// into req (all but its Body and context) when they are complete and
// plainly formed, and returns the number of bytes they span; ok is false
// when http.ReadRequest should parse it instead.
//
// Plainly formed: as wirehdr.ParseHead takes it, with an HTTP/1.1 request
// line of a token method and an origin-form target, and at most one Host.
func parseHead(b []byte, req *http.Request) (n int, ok bool) {
	head, ok := wirehdr.ParseHead(b)
	if !ok {
		return 0, false
	}
	method, target, ok := requestLine(head.StartLine)
	if !ok {
		return 0, false
	}
	h := head.Header
	*req = http.Request{
		Method:        method,
		RequestURI:    target,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: max(head.Length, 0),
		Close:         wirehdr.HasToken(h["Connection"], "close"),
	}
	// As net/http does, Host is kept out of the header map.
	if hosts, ok := h["Host"]; ok {
		if len(hosts) > 1 {
			return 0, false
		}
		req.Host = hosts[0]
		delete(h, "Host")
	}
	if u, ok := plainPath(target); ok {
		req.URL = u
	} else {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return 0, false
		}
		req.URL = u
	}
	return head.N, true
}

// requestLine splits "METHOD SP target SP HTTP/1.1".
func requestLine(line string) (method, target string, ok bool) {
	sp := 0
	for sp < len(line) && line[sp] != ' ' {
		if !wirehdr.IsToken(line[sp]) {
			return "", "", false
		}
		sp++
	}
	if sp == 0 || sp >= len(line) {
		return "", "", false
	}
	method = line[:sp]
	rest := line[sp+1:]
	const proto = " HTTP/1.1"
	if len(rest) <= len(proto) || rest[len(rest)-len(proto):] != proto {
		return "", "", false
	}
	target = rest[:len(rest)-len(proto)]
	if target[0] != '/' {
		return "", "", false // asterisk-, authority- or absolute-form
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f {
			return "", "", false
		}
	}
	return method, target, true
}

// plainPath returns the URL of a target made only of path characters that
// url.ParseRequestURI passes through unchanged (letters, digits, "-._~/").
func plainPath(target string) (*url.URL, bool) {
	for i := 0; i < len(target); i++ {
		c := target[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
			return nil, false
		}
	}
	return &url.URL{Path: target}, true
}
