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
