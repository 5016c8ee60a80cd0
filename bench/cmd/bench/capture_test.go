package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGateway serves /metrics from a text the test changes, and the
// conversations list of the management API.
type fakeGateway struct {
	mu      sync.Mutex
	metrics string
	scrapes int
	// after, when set, replaces metrics once scrapes reaches afterN.
	after  string
	afterN int
}

func (f *fakeGateway) set(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.metrics = text
}

func (f *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/metrics":
		f.scrapes++
		if f.after != "" && f.scrapes >= f.afterN {
			f.metrics = f.after
		}
		fmt.Fprint(w, f.metrics)
	case "/v1/memory/conversations":
		if r.URL.Query().Get("user") == "" {
			http.Error(w, "no user", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[{"id":"a","message_count":4},{"id":"b","message_count":6}]}`)
	default:
		http.NotFound(w, r)
	}
}

// mustFakeGateway starts a fakeGateway and returns it as a bench server.
func mustFakeGateway(tb testing.TB, f *fakeGateway) *server {
	tb.Helper()
	srv := httptest.NewServer(f)
	tb.Cleanup(srv.Close)
	return &server{name: "fake", baseURL: srv.URL + "/v1"}
}

// captureMetrics renders the capture metrics of a gateway that captured
// captured exchanges, of which the worker saved saved, with lag observations
// (bucket upper bound → cumulative count) summing to lagSum seconds.
func captureMetrics(captured, saved float64, lag map[string]float64, lagSum float64) string {
	var b strings.Builder
	b.WriteString("# HELP memgate_capture_captured_total Exchanges handed to capture.\n# TYPE memgate_capture_captured_total counter\n")
	fmt.Fprintf(&b, "%s %g\n%s %g\n%s 0\n%s 0\n", mCaptured, captured, mWorkerSaved, saved, mDropped, mDirectSaved)
	var count float64
	for _, le := range []string{"0.005", "0.02", "0.08", "+Inf"} {
		count = max(count, lag[le])
		fmt.Fprintf(&b, "%s%s\"} %g\n", mLagBucket, le, count)
	}
	fmt.Fprintf(&b, "%s %g\n%s %g\n", mLagSum, lagSum, mLagCount, count)
	fmt.Fprintf(&b, "%s 1.048576e+07\n%s 42\n", mHeapInuse, mGoroutines)
	return b.String()
}

func TestScrapeMetrics(t *testing.T) {
	f := &fakeGateway{metrics: captureMetrics(10, 7, map[string]float64{"0.005": 5, "0.02": 7}, 0.05)}
	m, err := scrapeMetrics(context.Background(), mustFakeGateway(t, f))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		series string
		want   float64
	}{
		{mCaptured, 10},
		{mWorkerSaved, 7},
		{mLagBucket + `0.02"}`, 7},
		{mLagBucket + `+Inf"}`, 7},
		{mHeapInuse, 10 << 20},
		{mGoroutines, 42},
	}
	for _, tt := range tests {
		if got := m[tt.series]; got != tt.want {
			t.Errorf("%s = %g, want %g", tt.series, got, tt.want)
		}
	}
	if m.drained() {
		t.Error("7 of 10 persisted counts as drained")
	}
	if got := len(m.lagBuckets()); got != 4 {
		t.Errorf("%d lag buckets, want 4", got)
	}
}

func TestBucketQuantile(t *testing.T) {
	before := map[float64]float64{0.005: 10, 0.02: 10, 0.08: 10}
	after := map[float64]float64{0.005: 10, 0.02: 60, 0.08: 110}
	tests := []struct {
		name          string
		before, after map[float64]float64
		q, want       float64
	}{
		{"median in the second bucket of the new observations", before, after, 0.5, 0.02},
		{"p99 in the last bucket", before, after, 0.99, 0.08},
		{"no new observations", after, after, 0.5, 0},
		{"empty histogram", nil, map[float64]float64{}, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bucketQuantile(tt.before, tt.after, tt.q); got != tt.want {
				t.Errorf("got %g, want %g", got, tt.want)
			}
		})
	}
}

// The watch waits for the backlog that remains when the load stops and
// reports the capture of exactly the watched stretch.
func TestCaptureWatchWaitsForTheBacklog(t *testing.T) {
	f := &fakeGateway{metrics: captureMetrics(100, 100, map[string]float64{"0.005": 100}, 0.1)}
	s := mustFakeGateway(t, f)
	ctx := context.Background()
	w, err := watchCapture(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	// The load captured 50 more; 20 are stored when it stops, the rest
	// a few scrapes later.
	f.mu.Lock()
	f.metrics = captureMetrics(150, 120, map[string]float64{"0.005": 110, "0.02": 120}, 0.3)
	f.after, f.afterN = captureMetrics(150, 150, map[string]float64{"0.005": 110, "0.02": 140, "0.08": 150}, 1.6), f.scrapes+4
	f.mu.Unlock()
	st, err := w.finish(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !st.drained || st.exchanges != 50 || st.persisted != 50 || st.backlog != 30 || st.atLoadEnd != 20 || st.lost != 0 {
		t.Errorf("got %+v, want 50 captured and persisted, backlog 30, 20 at load end, drained", st)
	}
	if st.drain <= 0 || st.turnsPerSecond() <= 0 || st.drainRate() <= 0 {
		t.Errorf("drain %v, turns/s %g, drain rate %g: want positive", st.drain, st.turnsPerSecond(), st.drainRate())
	}
	// 50 new observations summing to 1.5 s: 10 ≤ 5 ms, 30 more ≤ 20 ms,
	// the last 10 ≤ 80 ms.
	if st.lagMean != 30*time.Millisecond || st.lagP50 != 0.02 || st.lagP99 != 0.08 {
		t.Errorf("lag mean %v p50 %g p99 %g, want 30ms, 0.02, 0.08", st.lagMean, st.lagP50, st.lagP99)
	}
}

func TestCaptureWatchTimesOut(t *testing.T) {
	f := &fakeGateway{metrics: captureMetrics(0, 0, nil, 0)}
	s := mustFakeGateway(t, f)
	w, err := watchCapture(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	f.set(captureMetrics(10, 4, nil, 0))
	st, err := w.finish(context.Background(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.drained || st.persisted != 4 || st.backlog != 6 {
		t.Errorf("got %+v, want not drained, 4 persisted, backlog 6", st)
	}
}

func TestCheckStore(t *testing.T) {
	f := &fakeGateway{metrics: captureMetrics(5, 5, nil, 0)}
	c, err := checkStore(context.Background(), mustFakeGateway(t, f), "memgate", []string{"u-0", "u-1"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.messages != 20 || c.exchanges != 5 || c.users != 2 {
		t.Errorf("got %+v, want 20 messages of 2 users, 5 exchanges", c)
	}
}
