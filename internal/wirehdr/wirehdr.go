// Package wirehdr writes HTTP/1.1 header fields the way net/http does, minus
// the sorting: values with CR or LF have them turned into spaces and are
// trimmed of surrounding spaces and tabs, and fields whose names are not
// valid tokens are dropped.
//
// net/http's Header.Write sorts the keys of every header it writes (and
// allocates for it); the order of header fields carries no meaning, and at
// one request in flight the sort was a measurable share of what a proxy
// adds. memgate's server and upstream client write through this package.
//
// It also reads message heads of the plain shape clients and upstreams send
// (ParseHead, in read.go), leaving every other to net/http's readers.
package wirehdr

import (
	"bufio"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// Write writes every field of h whose name skip does not reject (skip may be
// nil), one "Name: value\r\n" line per value. A field whose name is not a
// valid token is dropped and reported in the error, so a caller that must
// refuse such a header (a client writing a request, as net/http's does) can,
// while a server writing a response ignores it.
func Write(bw *bufio.Writer, h http.Header, skip func(name string) bool) error {
	var err error
	for k, vs := range h {
		if skip != nil && skip(k) {
			continue
		}
		if !ValidName(k) {
			err = fmt.Errorf("http: invalid header field name %q", k)
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(CleanValue(v))
			bw.WriteString("\r\n")
		}
	}
	return err
}

// newlines turns CR and LF into spaces, as net/http does.
var newlines = strings.NewReplacer("\r", " ", "\n", " ")

// CleanValue is v as net/http writes it: CR and LF become spaces, and
// surrounding spaces and tabs are trimmed.
func CleanValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] == '\r' || v[i] == '\n' {
			v = newlines.Replace(v)
			break
		}
	}
	return textproto.TrimString(v)
}

// ValidName reports whether k can be written as a header name: a non-empty
// token (RFC 9110), so no separators, spaces or control characters.
func ValidName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !IsToken(k[i]) {
			return false
		}
	}
	return true
}
