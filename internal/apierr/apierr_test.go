package apierr

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestReadBodySizedByArrival: the buffer ReadBody reads into grows with the
// bytes that arrive, not with the length the client declares. It was
// allocated at the declared length up front, so a client declaring the
// limit and sending nothing (or a few bytes) made the gateway hold the
// limit, per connection, for as long as the read lasted.
func TestReadBodySizedByArrival(t *testing.T) {
	const declared = 8 << 20
	req := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader("{}")))
	req.ContentLength = declared
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, aerr := ReadBody(httptest.NewRecorder(), req, declared)
	runtime.ReadMemStats(&after)
	if aerr == nil || aerr.Status != http.StatusBadRequest {
		t.Fatalf("a body shorter than declared: %v (%q), want a 400", aerr, b)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > declared/8 {
		t.Fatalf("reading 2 of %d declared bytes allocated %d bytes", declared, got)
	}
}

// TestReadBody: a body within the limit is read whole, with or without a
// declared length; one over it is a 413, declared or not.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 300<<10)
	for _, tt := range []struct {
		name     string
		declared int64
		limit    int64
		want     int
	}{
		{"declared", int64(len(body)), 1 << 20, 0},
		{"chunked", -1, 1 << 20, 0},
		{"declared over the limit", int64(len(body)), 1 << 10, http.StatusRequestEntityTooLarge},
		{"chunked over the limit", -1, 1 << 10, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader(body)))
			req.ContentLength = tt.declared
			b, aerr := ReadBody(httptest.NewRecorder(), req, tt.limit)
			switch {
			case tt.want == 0 && aerr != nil:
				t.Fatalf("error %v", aerr)
			case tt.want == 0 && string(b) != body:
				t.Fatalf("read %d bytes, want %d", len(b), len(body))
			case tt.want != 0 && (aerr == nil || aerr.Status != tt.want):
				t.Fatalf("error %v, want status %d", aerr, tt.want)
			}
		})
	}
}

// TestReadBodyDeclaredFitsExactly: a body of its declared length is read
// into one buffer of that length, grown as bytes arrive: no slack past the
// body is kept, and little more than twice the body is allocated in all.
func TestReadBodyDeclaredFitsExactly(t *testing.T) {
	body := strings.Repeat("x", 1<<20)
	req := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader(body)))
	req.ContentLength = int64(len(body))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, aerr := ReadBody(httptest.NewRecorder(), req, 8<<20)
	runtime.ReadMemStats(&after)
	if aerr != nil || string(b) != body {
		t.Fatalf("read %d bytes, error %v", len(b), aerr)
	}
	if cap(b) != len(body) {
		t.Errorf("buffer of %d bytes kept for a %d-byte body", cap(b), len(body))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 5<<19 {
		t.Errorf("reading %d declared bytes allocated %d bytes", len(body), got)
	}
}
