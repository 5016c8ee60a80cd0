package httpserve

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
)

// readRequest reads the next request from br. A request whose line and
// header fields are already buffered whole, and are of the plain shape
// almost every client sends, is parsed here (parseHead); any other —
// split across reads, HTTP/1.0, chunked or with a Transfer-Encoding,
// folded or duplicated framing fields, anything unusual — is left to
// net/http's http.ReadRequest, which then reads it from the same bytes.
//
// Why: http.ReadRequest builds its header through textproto's general
// reader and parses every target as a URL; on a request-per-wake-up
// workload that was the largest single share of the gateway's own CPU
// time. parseHead accepts only what http.ReadRequest would parse to the
// same *http.Request (a fuzz test holds it to that), so the wire rules stay
// net/http's.
func readRequest(br *bufio.Reader, maxHeaderBytes int64) (*http.Request, error) {
	if br.Buffered() == 0 {
		br.Peek(1) // fill the buffer
	}
	if buf, err := br.Peek(br.Buffered()); err == nil {
		if req, n := parseHead(buf); req != nil && int64(n) <= maxHeaderBytes {
			br.Discard(n)
			if req.ContentLength > 0 {
				req.Body = &fixedBody{r: br, n: req.ContentLength}
			} else {
				req.Body = http.NoBody
			}
			return req, nil
		}
	}
	return http.ReadRequest(br)
}

// maxFastFields is the most header fields parseHead takes; a request with
// more goes to http.ReadRequest.
const maxFastFields = 64

// parseHead parses the request line and header fields at the start of b
// when they are complete and plainly formed, returning the request (without
// its Body) and the number of bytes they span; nil when http.ReadRequest
// should parse it instead.
//
// Plainly formed: an HTTP/1.1 request line with a token method and an
// origin-form target; every line ended by CRLF; field names of token
// characters followed directly by ':'; values of visible characters,
// spaces and tabs; at most one Host and one Content-Length (all digits);
// no Transfer-Encoding, no obsolete line folding.
func parseHead(b []byte) (*http.Request, int) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, 0
	}
	n := end + 4
	// One string for the whole head: method, target, names and values are
	// slices of it, so the request costs one allocation for its text.
	head := string(b[:end+2])
	le := indexCRLF(head, 0)
	if le < 0 {
		return nil, 0
	}
	method, target, ok := requestLine(head[:le])
	if !ok {
		return nil, 0
	}
	req := &http.Request{
		Method:        method,
		RequestURI:    target,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		ContentLength: 0,
	}
	var fields [maxFastFields]struct{ name, value string }
	nf := 0
	var hosts, lengths int
	for i := le + 2; i < len(head); {
		e := indexCRLF(head, i)
		if e < 0 || nf == maxFastFields {
			return nil, 0
		}
		name, value, ok := fieldLine(head[i:e])
		if !ok {
			return nil, 0
		}
		i = e + 2
		name = canonicalKey(name)
		switch name {
		case "Host":
			hosts++
			req.Host = value
			continue // as net/http does, Host is kept out of the header map
		case "Content-Length":
			lengths++
			cl, ok := parseLength(value)
			if !ok {
				return nil, 0
			}
			req.ContentLength = cl
		case "Transfer-Encoding", "Trailer":
			return nil, 0
		}
		fields[nf].name, fields[nf].value = name, value
		nf++
	}
	if hosts > 1 || lengths > 1 {
		return nil, 0
	}
	// The header map and one backing array for its values, as textproto
	// does.
	h := make(http.Header, nf)
	vals := make([]string, nf)
	for j := range nf {
		f := fields[j]
		if v, ok := h[f.name]; ok {
			h[f.name] = append(v, f.value)
			continue
		}
		vals[j] = f.value
		h[f.name] = vals[j : j+1 : j+1]
	}
	req.Header = h
	if u, ok := plainPath(target); ok {
		req.URL = u
	} else {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return nil, 0
		}
		req.URL = u
	}
	// What net/http's readRequest and readTransfer derive from the fields.
	if req.Host == "" {
		req.Host = req.URL.Host
	}
	if pragma, ok := h["Pragma"]; ok && len(pragma) > 0 && pragma[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	if c, ok := h["Connection"]; ok {
		for _, v := range c {
			if hasToken(v, "close") {
				req.Close = true
				break
			}
		}
	}
	return req, n
}

// requestLine splits "METHOD SP target SP HTTP/1.1".
func requestLine(line string) (method, target string, ok bool) {
	sp := 0
	for sp < len(line) && line[sp] != ' ' {
		if !isToken(line[sp]) {
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

// fieldLine splits "Name: value" into its name and its value without the
// surrounding spaces and tabs.
func fieldLine(line string) (name, value string, ok bool) {
	colon := 0
	for colon < len(line) && line[colon] != ':' {
		if !isToken(line[colon]) {
			return "", "", false
		}
		colon++
	}
	if colon == 0 || colon == len(line) {
		return "", "", false
	}
	v := line[colon+1:]
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return "", "", false
		}
	}
	return line[:colon], trimOWS(v), true
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey, without its allocation
// when the name is canonical already (as most clients send it).
func canonicalKey(name string) string {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return textproto.CanonicalMIMEHeaderKey(name)
		}
		upper = c == '-'
	}
	return name
}

// parseLength parses a Content-Length value: digits only, as net/http
// requires.
func parseLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
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

func indexCRLF(s string, from int) int {
	for i := from; i+1 < len(s); i++ {
		if s[i] == '\r' {
			if s[i+1] != '\n' {
				return -1
			}
			return i
		}
		if s[i] == '\n' {
			return -1 // a bare LF: net/http's rules apply
		}
	}
	return -1
}

// isToken reports whether c may appear in an RFC 9110 token.
func isToken(c byte) bool {
	return c < 0x80 && tokenTable[c]
}

var tokenTable = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// fixedBody is a request body of a known length read from the connection.
type fixedBody struct {
	r io.Reader
	n int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if err == io.EOF {
		if b.n > 0 {
			return n, io.ErrUnexpectedEOF
		}
	} else if err == nil && b.n == 0 {
		err = io.EOF
	}
	return n, err
}

func (b *fixedBody) Close() error { return nil }
