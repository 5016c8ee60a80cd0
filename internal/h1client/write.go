package h1client

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/memgate/memgate/internal/wirehdr"
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
	bw.WriteString(wirehdr.CleanValue(host))
	bw.WriteString("\r\n")
	// net/http sends a default User-Agent when there is none, only the
	// first when there are several, and none when it is empty.
	switch ua, ok := req.Header["User-Agent"]; {
	case !ok:
		bw.WriteString("User-Agent: Go-http-client/1.1\r\n")
	case len(ua) > 0 && ua[0] != "":
		bw.WriteString("User-Agent: ")
		bw.WriteString(wirehdr.CleanValue(ua[0]))
		bw.WriteString("\r\n")
	}
	if err := wirehdr.Write(bw, req.Header, fromFields); err != nil {
		// The connection is closed on error: what was buffered is never
		// sent.
		return err
	}
	if req.Close {
		bw.WriteString("Connection: close\r\n")
	}
	if req.ContentLength > 0 || sendsZeroLength(method) {
		var num [20]byte
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(num[:0], max(req.ContentLength, 0), 10))
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

// fromFields reports the header fields written from the request's own
// fields rather than its Header.
func fromFields(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// sendsZeroLength reports whether a request of method without a body says
// "Content-Length: 0", as net/http's does.
func sendsZeroLength(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}
