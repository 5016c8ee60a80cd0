package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// deadlineWriter is a response writer with a connection read deadline,
// as net/http's own has (http.ResponseController reaches it). It notes a
// deadline still set when the answer is written: once a body is read,
// net/http reads the connection in the background, and a deadline
// passing there cancels the request's context.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	mu        sync.Mutex
	deadline  time.Time
	lingering bool
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.mu.Lock()
	w.lingering = w.lingering || !w.deadline.IsZero()
	w.mu.Unlock()
	w.ResponseRecorder.WriteHeader(code)
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	return nil
}

func (w *deadlineWriter) readDeadline() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deadline
}

// deadlineBody is a request body that records, at each read, whether
// its connection had a read deadline at most limit ahead.
type deadlineBody struct {
	r     io.Reader
	w     *deadlineWriter
	limit time.Duration
	reads int
	bad   []string
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	b.reads++
	now := time.Now()
	switch d := b.w.readDeadline(); {
	case d.IsZero():
		b.bad = append(b.bad, "a read without a deadline")
	case d.After(now.Add(b.limit)):
		b.bad = append(b.bad, "a read under a deadline "+d.Sub(now).String()+" ahead")
	}
	return b.r.Read(p)
}

func (b *deadlineBody) Close() error { return nil }

// TestManagementBodiesReadUnderADeadline: every body the management side
// reads (the memory API's, an import's, /mcp's, the inspector's login)
// arrives within a minute. The server has no read timeout (it would cut
// streams), and only the chat routes and the inspector's forms set one:
// a client dribbling an import of max_body_bytes held a goroutine and
// its buffer for as long as it liked.
func TestManagementBodiesReadUnderADeadline(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	cfg := recallConfigs(t, up)["sqlite"](t)
	g := startGateway(t, cfg)
	h := gatewayHandler(t, cfg, g)

	imp := `{"user":"u","conversation":"c","messages":[` +
		`{"role":"user","content":"hi","timestamp":"2024-05-07T18:30:00Z"},` +
		`{"role":"assistant","content":"hello","timestamp":"2024-05-07T18:30:05Z"}]}`
	for _, tt := range []struct {
		name, path, ct, body string
		hdr                  map[string]string
	}{
		{"import", "/v1/memory/import", "application/json", imp, nil},
		{"preview", "/v1/memory/preview", "application/json", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"X-Memory-User": "u"}},
		{"add fact", "/v1/memory/users/u/facts", "application/json", `{"type":"preference","key":"tea","value":"green"}`, nil},
		{"search", "/v1/memory/search", "application/json", `{"user":"u","query":"tea"}`, nil},
		{"mcp", "/mcp", "application/json", initialize, map[string]string{"Accept": "application/json, text/event-stream"}},
		{"inspector login", "/ui/login", "application/x-www-form-urlencoded", "key=", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			body := &deadlineBody{r: strings.NewReader(tt.body), w: w, limit: time.Minute}
			r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+tt.path, body)
			r.ContentLength = int64(len(tt.body))
			r.RemoteAddr = "127.0.0.1:5000"
			r.Header.Set("Content-Type", tt.ct)
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			h.ServeHTTP(w, r)
			if w.Code >= 500 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if body.reads == 0 {
				t.Fatalf("the body was not read (status %d: %s)", w.Code, w.Body)
			}
			if len(body.bad) > 0 {
				t.Fatalf("status %d; %d reads, %v", w.Code, body.reads, body.bad)
			}
			if w.lingering {
				t.Fatalf("status %d: the read deadline was still set when the answer was written", w.Code)
			}
		})
	}
}
