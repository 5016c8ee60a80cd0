package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// maxPooledBody is the largest body buffer returned to the pool; bigger ones
// are left to the garbage collector so one huge request does not pin memory.
const maxPooledBody = 1 << 20

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBodyBuf() *bytes.Buffer { return bodyPool.Get().(*bytes.Buffer) }

func putBodyBuf(b *bytes.Buffer) {
	if b.Cap() > maxPooledBody {
		return
	}
	b.Reset()
	bodyPool.Put(b)
}

// copyPool holds the buffers used to relay response bodies.
var copyPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bufferPool adapts copyPool to httputil.BufferPool.
type bufferPool struct{}

func (bufferPool) Get() []byte  { return *copyPool.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyPool.Put(&b) }

// readBody reads the request body into a pooled buffer, answering 413 when it
// exceeds limit.
func readBody(r *http.Request, limit int64) (*bytes.Buffer, *apiError) {
	tooLarge := func() *apiError {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
			Message: "The request body exceeds the gateway's limit of " + strconv.FormatInt(limit, 10) + " bytes."}
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	buf := getBodyBuf()
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		putBodyBuf(buf)
		return nil, invalid("", "The request body could not be read.")
	}
	if int64(buf.Len()) > limit {
		putBodyBuf(buf)
		return nil, tooLarge()
	}
	return buf, nil
}
