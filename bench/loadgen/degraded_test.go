package loadgen

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestDegradedParts(t *testing.T) {
	tests := []struct {
		header       string
		history, any bool
	}{
		{"", false, false},
		{"history", true, true},
		{"recall,history", true, true},
		{"embedding", false, true},
		{"recall, summary", false, true},
		{"store", true, true}, // nothing loaded, history included
		{"all", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			history, anyPart := DegradedParts(tt.header)
			if history != tt.history || anyPart != tt.any {
				t.Fatalf("DegradedParts(%q) = %v, %v, want %v, %v", tt.header, history, anyPart, tt.history, tt.any)
			}
		})
	}
}

// A run counts the successful responses that carry X-Memory-Degraded, and
// those of them that left the history out, whatever the body: the gateway's
// metric counts parts, not requests.
func TestRunCountsDegradedResponses(t *testing.T) {
	// Each request names the header value to answer with; every
	// connection's ten turns go through these.
	parts := []string{"", "", "", "", "", "recall,summary", "history", "embedding", "store", "all"}
	tests := []struct {
		name   string
		stream bool
		status int
		// want: degraded and history-less responses of 40 requests.
		degraded, history uint64
	}{
		{"plain", false, http.StatusOK, 20, 12},
		{"streamed", true, http.StatusOK, 20, 12},
		{"failed requests are not counted", false, http.StatusBadGateway, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
				if h := r.Header.Get("X-Answer-Degraded"); h != "" {
					w.Header().Set(DegradedHeader, h)
				}
				w.WriteHeader(tt.status)
				if tt.stream {
					io.WriteString(w, "data: {}\n\ndata: [DONE]\n\n")
				} else {
					io.WriteString(w, `{"ok":true}`)
				}
			})
			res, err := Run(context.Background(), Options{
				Request: Request{URL: srv.URL},
				Conns:   4,
				PerConn: len(parts),
				Stream:  tt.stream,
				Vary: func(conn, seq int) ([]byte, http.Header) {
					return nil, http.Header{"X-Answer-Degraded": {parts[seq]}}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Degraded != tt.degraded || res.DegradedHistory != tt.history {
				t.Errorf("degraded %d, history left out %d, want %d, %d", res.Degraded, res.DegradedHistory, tt.degraded, tt.history)
			}
			if tt.status == http.StatusOK {
				if got := res.DegradedShare(); got != 0.5 {
					t.Errorf("DegradedShare() = %g, want 0.5", got)
				}
				if got := res.DegradedHistoryShare(); got != 0.3 {
					t.Errorf("DegradedHistoryShare() = %g, want 0.3", got)
				}
			} else if !strings.HasPrefix(res.FirstError, "status 502") {
				t.Errorf("first error %q, want status 502", res.FirstError)
			}
		})
	}
}
