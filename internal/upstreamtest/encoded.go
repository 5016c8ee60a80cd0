package upstreamtest

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
)

// Encoded wraps h as an upstream (or a CDN in front of one) that compresses
// every reply with enc — "gzip", "x-gzip" or "deflate" (zlib, as RFC 9110
// names it; "deflate-raw" sends a bare DEFLATE stream under the name
// deflate, as some servers do) — whether or not the request asked for it,
// and says so in Content-Encoding. Each flush of h flushes the compressor
// first (a sync flush), so an event stream arrives compressed an event at a
// time.
func Encoded(enc string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &encodedWriter{ResponseWriter: w, enc: enc}
		defer ew.close()
		h.ServeHTTP(ew, r)
	})
}

// encodedWriter compresses what is written through it.
type encodedWriter struct {
	http.ResponseWriter
	enc     string
	c       io.WriteCloser
	flusher interface{ Flush() error }
}

func (w *encodedWriter) WriteHeader(code int) {
	if w.c != nil {
		return
	}
	name := w.enc
	switch w.enc {
	case "deflate":
		zw := zlib.NewWriter(w.ResponseWriter)
		w.c, w.flusher = zw, zw
	case "deflate-raw":
		name = "deflate"
		fw, _ := flate.NewWriter(w.ResponseWriter, flate.DefaultCompression)
		w.c, w.flusher = fw, fw
	default:
		gw := gzip.NewWriter(w.ResponseWriter)
		w.c, w.flusher = gw, gw
	}
	w.Header().Set("Content-Encoding", name)
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w *encodedWriter) Write(p []byte) (int, error) {
	if w.c == nil {
		w.WriteHeader(http.StatusOK)
	}
	return w.c.Write(p)
}

// FlushError sync-flushes the compressor, then the connection.
func (w *encodedWriter) FlushError() error {
	if w.c == nil {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.flusher.Flush(); err != nil {
		return err
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for callers that assert http.Flusher.
func (w *encodedWriter) Flush() { _ = w.FlushError() }

func (w *encodedWriter) close() {
	if w.c == nil {
		w.WriteHeader(http.StatusOK)
	}
	w.c.Close()
}
