package h1client

import (
	"bufio"
	"net/http"

	"github.com/memgate/memgate/internal/wirehdr"
)

// readResponse reads the response to req from br. A response whose status
// line and header fields are already buffered whole and plainly formed, and
// whose body has a Content-Length, is parsed here (parseResponseHead); any
// other — split across reads, chunked or read to the connection's end, 1xx,
// 204, 304, an answer to HEAD, anything unusual — is left to
// http.ReadResponse, which then reads it from the same bytes. As with the
// server's request heads (httpserve), it takes only what http.ReadResponse
// parses to the same *http.Response (FuzzParseResponseHead holds it to
// that).
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if resp, n := parseResponseHead(wirehdr.Buffered(br), req); resp != nil {
		br.Discard(n)
		resp.Body = wirehdr.Body(br, resp.ContentLength)
		return resp, nil
	}
	return http.ReadResponse(br, req)
}

// parseResponseHead parses the status line and header fields at the start
// of b when they are complete and plainly formed, returning the response to
// req (without its Body) and the number of bytes they span; nil when
// http.ReadResponse should parse it instead.
//
// Plainly formed: as wirehdr.ParseHead takes it, with a Content-Length and
// a status line "HTTP/1.1 DDD reason" of a status from 200 to 999 other
// than 204 and 304; and not an answer to HEAD.
func parseResponseHead(b []byte, req *http.Request) (*http.Response, int) {
	if req != nil && req.Method == http.MethodHead {
		return nil, 0
	}
	head, ok := wirehdr.ParseHead(b)
	if !ok || head.Length < 0 {
		return nil, 0
	}
	line, h := head.StartLine, head.Header
	code, ok := statusCode(line)
	if !ok || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil, 0
	}
	resp := &http.Response{
		Status:        line[len("HTTP/1.1 "):],
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: head.Length,
		Request:       req,
	}
	if wirehdr.HasToken(h["Connection"], "close") {
		// net/http drops the field once it has read it.
		resp.Close = true
		delete(h, "Connection")
	}
	return resp, head.N
}

// statusCode reads the code of "HTTP/1.1 DDD" or "HTTP/1.1 DDD reason".
func statusCode(line string) (int, bool) {
	const proto = "HTTP/1.1 "
	if len(line) < len(proto)+3 || line[:len(proto)] != proto || len(line) > len(proto)+3 && line[len(proto)+3] != ' ' {
		return 0, false
	}
	code := 0
	for _, c := range []byte(line[len(proto) : len(proto)+3]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	return code, true
}
