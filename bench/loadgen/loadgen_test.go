package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mustServer starts a test server that counts the requests it answers.
func mustServer(tb testing.TB, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	tb.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv, &n
}

func okHandler(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) }

func TestRunRequestCount(t *testing.T) {
	srv, served := mustServer(t, okHandler)
	tests := []struct {
		name  string
		conns int
		n     int
	}{
		{"one connection", 1, 50},
		{"eight connections", 8, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := served.Load()
			res, err := Run(context.Background(), Options{
				Request: Request{URL: srv.URL, Body: []byte(`{}`)},
				Conns:   tt.conns, Requests: tt.n,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != uint64(tt.n) || res.Errors != 0 {
				t.Errorf("requests/errors = %d/%d, want %d/0 (%s)", res.Requests, res.Errors, tt.n, res.FirstError)
			}
			if got := served.Load() - before; got != int64(tt.n) {
				t.Errorf("server saw %d requests, want %d", got, tt.n)
			}
			if res.Latency.Count() != uint64(tt.n) || res.Latency.Quantile(0.5) <= 0 || res.RPS() <= 0 {
				t.Errorf("latency count %d p50 %v rps %v", res.Latency.Count(), res.Latency.Quantile(0.5), res.RPS())
			}
			if res.Bytes != uint64(tt.n*len(`{"ok":true}`)) {
				t.Errorf("bytes %d", res.Bytes)
			}
		})
	}
}

func TestRunCountsErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		h      http.HandlerFunc
		want   string
	}{
		{"5xx status", false, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}, "status 502"},
		{"stream without DONE", true, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "data: {}\n\n")
		}, "[DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := mustServer(t, tt.h)
			res, err := Run(context.Background(), Options{
				Request: Request{URL: srv.URL}, Conns: 2, Requests: 10, Stream: tt.stream,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 10 || res.Requests != 0 || !strings.Contains(res.FirstError, tt.want) {
				t.Errorf("errors %d requests %d first %q", res.Errors, res.Requests, res.FirstError)
			}
		})
	}
}

func TestRunStreamTTFB(t *testing.T) {
	// The stream is held open 20ms after its first event, inside the
	// request, so the last byte arrives at least 20ms after the request
	// began and after the first byte.
	srv, _ := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: {}\n\n")
		http.NewResponseController(w).Flush()
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, "data: [DONE]\n\n")
	})
	res, err := Run(context.Background(), Options{Request: Request{URL: srv.URL}, Requests: 1, Stream: true})
	if err != nil || res.Requests != 1 {
		t.Fatalf("err %v requests %d (%s)", err, res.Requests, res.FirstError)
	}
	if ttfb, lat := res.TTFB.Max(), res.Latency.Max(); ttfb >= lat || lat < 20*time.Millisecond {
		t.Errorf("ttfb %v should be below total latency %v (≥20ms)", ttfb, lat)
	}
}

func TestRunConnHeader(t *testing.T) {
	var mu sync.Mutex
	got := map[string]bool{}
	srv, _ := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("X-Common")+"/"+r.Header.Get("X-Conn")] = true
		mu.Unlock()
	})
	// Every worker sends at least once in 200 ms.
	res, err := Run(context.Background(), Options{
		Request:    Request{URL: srv.URL, Header: http.Header{"X-Common": {"c"}}},
		Conns:      3,
		Duration:   200 * time.Millisecond,
		ConnHeader: func(i int) http.Header { return http.Header{"X-Conn": {fmt.Sprint(i)}} },
	})
	if err != nil || res.Requests == 0 {
		t.Fatalf("err %v, requests %d", err, res.Requests)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"c/0", "c/1", "c/2"} {
		if !got[want] {
			t.Errorf("no request carried %q; saw %v", want, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("saw header combinations %v, want exactly 3", got)
	}
}

func TestRunPerConn(t *testing.T) {
	var mu sync.Mutex
	perConn := map[string]int{}
	srv, _ := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perConn[r.Header.Get("X-Conn")]++
		mu.Unlock()
	})
	tests := []struct {
		name          string
		conns, per    int
		wantMeasured  uint64
		requestsLimit int
	}{
		{"every connection sends exactly PerConn", 4, 7, 28, 0},
		{"the request limit still applies", 4, 7, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			clear(perConn)
			mu.Unlock()
			res, err := Run(context.Background(), Options{
				Request: Request{URL: srv.URL}, Conns: tt.conns, PerConn: tt.per, Requests: tt.requestsLimit,
				ConnHeader: func(i int) http.Header { return http.Header{"X-Conn": {fmt.Sprint(i)}} },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != tt.wantMeasured {
				t.Errorf("measured %d requests, want %d", res.Requests, tt.wantMeasured)
			}
			mu.Lock()
			defer mu.Unlock()
			for c, n := range perConn {
				if n > tt.per || tt.requestsLimit == 0 && n != tt.per {
					t.Errorf("connection %s sent %d requests, want %d", c, n, tt.per)
				}
			}
		})
	}
}

func TestRunVary(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // X-Turn → body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.Header.Get("X-Conn")+"/"+r.Header.Get("X-Turn")] = string(b)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	res, err := Run(context.Background(), Options{
		Request: Request{URL: srv.URL, Body: []byte("fixed")}, Conns: 2, PerConn: 3,
		ConnHeader: func(i int) http.Header { return http.Header{"X-Conn": {fmt.Sprint(i)}, "X-Turn": {"overridden"}} },
		Vary: func(conn, seq int) ([]byte, http.Header) {
			h := http.Header{"X-Turn": {fmt.Sprint(seq)}}
			if seq == 2 {
				return nil, h // keeps Request.Body
			}
			return []byte(fmt.Sprintf("c%d-t%d", conn, seq)), h
		},
	})
	if err != nil || res.Requests != 6 {
		t.Fatalf("err %v, requests %d (%s)", err, res.Requests, res.FirstError)
	}
	want := map[string]string{"0/0": "c0-t0", "0/1": "c0-t1", "0/2": "fixed", "1/0": "c1-t0", "1/1": "c1-t1", "1/2": "fixed"}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("request %s carried %q, want %q (saw %v)", k, seen[k], v, seen)
		}
	}
}

func TestRunDurationAndWarmup(t *testing.T) {
	srv, served := mustServer(t, okHandler)
	res, err := Run(context.Background(), Options{
		Request: Request{URL: srv.URL}, Conns: 2, Duration: 200 * time.Millisecond, Warmup: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Requests >= uint64(served.Load()) {
		t.Errorf("measured %d of %d served; warmup requests must not be measured", res.Requests, served.Load())
	}
	// A lower bound only: a busy machine may take longer, never shorter.
	if res.Elapsed < 150*time.Millisecond {
		t.Errorf("elapsed %v, want at least the 200ms duration less the warmup's slack", res.Elapsed)
	}
}

func TestRunOpenLoopRate(t *testing.T) {
	srv, _ := mustServer(t, okHandler)
	res, err := Run(context.Background(), Options{
		Request: Request{URL: srv.URL}, Conns: 4, Rate: 200, Duration: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// 200/s for 0.5 s schedules at most 101 requests (the first at time 0),
	// however fast the server is; how many of them complete in time depends
	// on the machine, so only the schedule's ceiling is asserted.
	if res.Requests < 1 || res.Requests > 101 || res.Errors != 0 {
		t.Errorf("open loop completed %d requests (%d errors), want 1..101", res.Requests, res.Errors)
	}
}

func TestRunCancel(t *testing.T) {
	srv, _ := mustServer(t, okHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{Request: Request{URL: srv.URL}, Conns: 2, Duration: time.Hour})
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{}, {Request: Request{URL: "http://x"}},
		{Request: Request{URL: "http://x"}, PerConn: 3, Rate: 10}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) succeeded", o)
		}
	}
}
