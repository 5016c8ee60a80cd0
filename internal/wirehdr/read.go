package wirehdr

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// Reading. memgate's server and upstream client parse a message head here
// when it is plainly formed, and leave every other head to net/http's
// readers, which then read it from the same buffered bytes: this package
// accepts only heads net/http would parse to the same result (each reader's
// fuzz test holds it to that), so the wire rules stay net/http's. Why: at
// one request in flight, textproto's general reader was the largest single
// share of a proxied request's CPU time.

// maxFields is the most header fields parseFields takes.
const maxFields = 64

// splitHead returns the head at the start of b — its start line and header
// fields, each with its CRLF — as one string, and the number of bytes it
// spans with the blank line that ends it; ok is false when b holds no
// complete head. One string for the whole head lets every name and value be
// a slice of it: one allocation for the text of a message.
func splitHead(b []byte) (head string, n int, ok bool) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return "", 0, false
	}
	return string(b[:end+2]), end + 4, true
}

// Head is a plainly formed message head.
type Head struct {
	// StartLine is the request or status line, without its CRLF.
	StartLine string
	Header    http.Header
	// Length is the Content-Length, -1 when there is none.
	Length int64
	// N is the number of bytes the head spans, its blank line included.
	N int
}

// ParseHead parses the head at the start of b when it is complete and
// plainly formed: every line ended by CRLF, header fields as parseFields
// takes them, at most one Content-Length (all digits), and no
// Transfer-Encoding or Trailer. The start line is the caller's to check.
func ParseHead(b []byte) (Head, bool) {
	head, n, ok := splitHead(b)
	if !ok {
		return Head{}, false
	}
	start, next, ok := line(head, 0)
	if !ok {
		return Head{}, false
	}
	h, framing, ok := parseFields(head[next:])
	if !ok || framing.transfer {
		return Head{}, false
	}
	length, ok := framing.contentLength()
	if !ok {
		return Head{}, false
	}
	return Head{StartLine: start, Header: h, Length: length, N: n}, true
}

// Buffered returns the bytes br holds, filling it first when it holds none;
// they stay valid until br is read.
func Buffered(br *bufio.Reader) []byte {
	if br.Buffered() == 0 {
		br.Peek(1)
	}
	b, _ := br.Peek(br.Buffered())
	return b
}

// line returns the line of head starting at offset i without its CRLF, and
// the offset of the next line; ok is false when the line does not end in
// CRLF or holds a bare CR or LF.
func line(head string, i int) (l string, next int, ok bool) {
	for j := i; j+1 < len(head); j++ {
		switch head[j] {
		case '\r':
			if head[j+1] != '\n' {
				return "", 0, false
			}
			return head[i:j], j + 2, true
		case '\n':
			return "", 0, false
		}
	}
	return "", 0, false
}

// framing is what parseFields notes of the fields that frame a body, so
// that ParseHead looks none of them up.
type framing struct {
	// transfer reports a Transfer-Encoding or Trailer field.
	transfer bool
	// lengths counts the Content-Length fields; length is the first one.
	lengths int
	length  string
}

// contentLength returns the one Content-Length: -1 when there is none; ok
// is false when there are several or the value is not all digits (net/http
// accepts some of those, with rules of its own).
func (f framing) contentLength() (n int64, ok bool) {
	switch {
	case f.lengths == 0:
		return -1, true
	case f.lengths > 1 || f.length == "" || len(f.length) > 18:
		return 0, false
	}
	for i := 0; i < len(f.length); i++ {
		c := f.length[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseFields parses block, header field lines each ended by CRLF, into a
// header as textproto's reader and net/http would: canonical names, values
// without surrounding spaces and tabs, and Cache-Control: no-cache added
// for a Pragma: no-cache without one. It reports false for anything not
// plainly formed: a name with a non-token byte or space before its colon,
// a control byte in a value, obsolete line folding, a bare CR or LF, or
// more than maxFields fields. A field costs one map assignment (and a
// lookup only when a name of its length came before), and the framing
// fields are noted on the way.
func parseFields(block string) (http.Header, framing, bool) {
	var f framing
	nf := strings.Count(block, "\n")
	if nf > maxFields {
		return nil, f, false
	}
	// The map and one backing array for its values, as textproto does.
	h := make(http.Header, nf)
	vals := make([]string, nf)
	// lengths has bit len(name)%64 set for every name so far: a name of
	// a new length is no repeat, and needs no lookup to tell.
	var lengths uint64
	pragmaNoCache, cacheControl := false, false
	for i, j := 0, 0; i < len(block); j++ {
		name, value, next, ok := field(block, i)
		if !ok {
			return nil, f, false
		}
		name = canonicalKey(name)
		bit := uint64(1) << (len(name) % 64)
		var prev []string
		if lengths&bit != 0 {
			prev = h[name]
		}
		lengths |= bit
		repeated := prev != nil
		if repeated {
			h[name] = append(prev, value)
		} else {
			vals[j] = value
			h[name] = vals[j : j+1 : j+1]
		}
		switch name {
		case "Transfer-Encoding", "Trailer":
			f.transfer = true
		case "Content-Length":
			if f.lengths == 0 {
				f.length = value
			}
			f.lengths++
		case "Pragma":
			pragmaNoCache = pragmaNoCache || !repeated && value == "no-cache"
		case "Cache-Control":
			cacheControl = true
		}
		i = next
	}
	if pragmaNoCache && !cacheControl {
		h["Cache-Control"] = []string{"no-cache"}
	}
	return h, f, true
}

// field reads the field line "Name: value\r\n" starting at block[i] in
// one pass: its name, its value without the surrounding spaces and tabs,
// and the offset of the next line. ok is false for a name with a non-token
// byte (a space before the colon included) or no colon, and for a value
// with a control byte other than tab, DEL, or a CR not followed by LF.
func field(block string, i int) (name, value string, next int, ok bool) {
	colon := i
	for colon < len(block) && block[colon] != ':' {
		if !IsToken(block[colon]) {
			return "", "", 0, false
		}
		colon++
	}
	if colon == i || colon == len(block) {
		return "", "", 0, false
	}
	end := colon + 1
	for end < len(block) {
		if c := block[end]; c < ' ' && c != '\t' || c == 0x7f {
			break
		}
		end++
	}
	if end+1 >= len(block) || block[end] != '\r' || block[end+1] != '\n' {
		return "", "", 0, false
	}
	return block[i:colon], textproto.TrimString(block[colon+1 : end]), end + 2, true
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

// Value returns the first value of h's field named by the canonical key k,
// or "". Header.Get canonicalizes its key on every call; the keys of a
// parsed header, and the constants callers look up, are canonical already.
func Value(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// HasToken reports whether one of the comma-separated values vs holds
// token, case-insensitively (as in Connection: keep-alive, close).
func HasToken(vs []string, token string) bool {
	for _, v := range vs {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(part), token) {
				return true
			}
		}
	}
	return false
}

// IsToken reports whether c may appear in an RFC 9110 token (a method or a
// field name).
func IsToken(c byte) bool { return c < 0x80 && tokenTable[c] }

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

// Body is a message body of a known length n read from r: it reports
// io.EOF after n bytes, and io.ErrUnexpectedEOF when r ends before. With n
// at most 0 it is http.NoBody.
func Body(r io.Reader, n int64) io.ReadCloser {
	if n <= 0 {
		return http.NoBody
	}
	return &lengthBody{r: r, n: n}
}

type lengthBody struct {
	r io.Reader
	n int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
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

func (b *lengthBody) Close() error { return nil }
