package h1client

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// writeRequest writes req as HTTP/1.1 to bw, as req.Write would for the
// requests a gateway forwards: a known Content-Length (or no body), no
// trailers. Anything else — a body of unknown length, trailers, a
// Transfer-Encoding — goes through req.Write.
//
// Why not always req.Write: it formats with fmt, sorts the header keys and
// sets up a transfer writer per request, a large share of what forwarding a
// small request costs at one request in flight. What the wire carries is
// the same: the request line, Host, the default User-Agent when the caller
// set none, the headers (values with CR or LF turned into spaces and
// trimmed, as net/http does), Content-Length, then the body; the body is
// closed.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody && req.ContentLength <= 0 || len(req.Trailer) > 0 || len(req.TransferEncoding) > 0 {
		return req.Write(bw)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(req.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(cleanValue(host))
	bw.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		bw.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written from the request's fields
		case "User-Agent":
			if len(vs) == 0 {
				continue
			}
			// net/http sends only the first User-Agent.
			vs = vs[:1]
		}
		if !validName(k) {
			return fmt.Errorf("http: invalid header field name %q", k)
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(cleanValue(v))
			bw.WriteString("\r\n")
		}
	}
	if req.Close {
		bw.WriteString("Connection: close\r\n")
	}
	if req.ContentLength > 0 || sendsZeroLength(method) {
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.FormatInt(max(req.ContentLength, 0), 10))
		bw.WriteString("\r\n")
	}
	_, err := bw.WriteString("\r\n")
	if !hasBody {
		return err
	}
	n, err := io.CopyN(bw, req.Body, req.ContentLength)
	req.Body.Close()
	if err != nil {
		if err == io.EOF {
			return fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
		}
		return err
	}
	return nil
}

// sendsZeroLength reports whether a request of method without a body says
// "Content-Length: 0", as net/http's does.
func sendsZeroLength(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// cleanValue is a header value as net/http writes it: CR and LF become
// spaces, and surrounding spaces and tabs are trimmed.
func cleanValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return strings.Trim(v, " \t")
}

// validName reports whether k can be written as a header name: a non-empty
// token without separators, spaces or controls.
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
