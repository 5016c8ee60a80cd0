package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// copyPool holds the buffers used to relay response bodies.
var copyPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bufferPool adapts copyPool to httputil.BufferPool.
type bufferPool struct{}

func (bufferPool) Get() []byte  { return *copyPool.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyPool.Put(&b) }

// readBody reads the request body, answering 413 when it exceeds limit. A
// body of known length is read into a slice of exactly that size: the
// forwarded body is handed to the transport and never reused, so a pool
// would only add copies.
func readBody(r *http.Request, limit int64) ([]byte, *apiError) {
	tooLarge := func() *apiError {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
			Message: "The request body exceeds the gateway's limit of " + strconv.FormatInt(limit, 10) + " bytes."}
	}
	unreadable := func() *apiError { return invalid("", "The request body could not be read.") }
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	if r.ContentLength >= 0 && r.Body != nil {
		// The server's body reader enforces the length: a short body is
		// an error, nothing past it is read.
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, unreadable()
		}
		return b, nil
	}
	var buf bytes.Buffer
	if r.Body != nil {
		if _, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1)); err != nil {
			return nil, unreadable()
		}
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge()
	}
	return buf.Bytes(), nil
}
