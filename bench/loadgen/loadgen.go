// Package loadgen is memgate's HTTP load generator: closed-loop (N
// connections each sending back to back) or open-loop (a fixed arrival rate,
// latency measured from each request's scheduled start so a stalled server
// cannot hide its queueing), with latency and time-to-first-byte histograms
// in bounded memory.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Request is the request every worker sends.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// Options configure a Run.
type Options struct {
	// Request is sent repeatedly.
	Request Request
	// Conns is the number of concurrent connections (closed loop) or the
	// maximum in flight (open loop). Default 1.
	Conns int
	// Duration is the measured period. Zero means run until Requests have
	// been measured.
	Duration time.Duration
	// Requests stops the run after this many measured requests (0: no limit).
	Requests int
	// PerConn stops each connection after it has sent this many requests,
	// warm-up included (0: no limit). Closed loop only; with ConnHeader it
	// gives every connection's conversation exactly PerConn turns.
	PerConn int
	// Warmup is run before the measured period and not recorded.
	Warmup time.Duration
	// Rate switches to open loop at this many requests per second.
	Rate float64
	// Stream expects a text/event-stream body ending in "data: [DONE]";
	// a body that does not end so counts as an error.
	Stream bool
	// Timeout bounds one request (default 30 s).
	Timeout time.Duration
	// ConnHeader, when set, adds headers for the requests of connection
	// (worker) i in [0, Conns), for example a conversation id per connection.
	ConnHeader func(i int) http.Header
	// Vary, when set, gives connection conn's seq-th request (from 0,
	// warm-up included) its own body (nil keeps Request.Body) and extra
	// headers (applied after ConnHeader's), for example a different user
	// message each turn, or a new conversation every few turns.
	Vary func(conn, seq int) (body []byte, header http.Header)
}

// Result is what a Run measured.
type Result struct {
	// Requests completed successfully in the measured period.
	Requests uint64
	// Errors in the measured period: transport errors, non-2xx statuses,
	// truncated streams.
	Errors uint64
	// FirstError describes the first error seen, for diagnosis.
	FirstError string
	// Elapsed is the measured period's wall time.
	Elapsed time.Duration
	// Latency is request start (scheduled start in open loop) to the last
	// body byte, over successful requests.
	Latency *Histogram
	// TTFB is request start to the first body byte, over successful requests.
	TTFB *Histogram
	// Bytes is the response body bytes read in the measured period.
	Bytes uint64
	// Degraded is the successful requests whose response named a part of
	// memory left out (DegradedHeader); DegradedHistory those of them
	// whose list included the conversation's history (see DegradedParts).
	Degraded, DegradedHistory uint64
}

// RPS returns successful requests per second over the measured period.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// worker holds one goroutine's private statistics, merged after the run.
type worker struct {
	conn      int
	seq       int         // requests sent so far
	header    http.Header // Request.Header plus ConnHeader's, fixed for the run
	lat, ttfb *Histogram
	ok, errs  uint64
	bytes     uint64
	// degraded counts the measured successful responses that set
	// DegradedHeader, degradedHistory those that left the history out.
	degraded, degradedHistory uint64
	firstErr                  error
	buf                       []byte
}

// Run drives opts.Request until the measured period or request count is
// over, or ctx is cancelled, and returns what it measured.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.Request.URL == "" {
		return Result{}, errors.New("loadgen: no URL")
	}
	if opts.Duration <= 0 && opts.Requests <= 0 && opts.PerConn <= 0 {
		return Result{}, errors.New("loadgen: need a duration or a request count")
	}
	if opts.PerConn > 0 && opts.Rate > 0 {
		return Result{}, errors.New("loadgen: PerConn needs the closed loop (no Rate)")
	}
	opts.Conns = max(opts.Conns, 1)
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Request.Method == "" {
		opts.Request.Method = http.MethodPost
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        opts.Conns,
		MaxIdleConnsPerHost: opts.Conns,
		MaxConnsPerHost:     opts.Conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	measureStart := time.Now().Add(opts.Warmup)
	var deadline time.Time
	if opts.Duration > 0 {
		deadline = measureStart.Add(opts.Duration)
	}
	var claimed atomic.Int64 // measured requests started, for opts.Requests
	// admit reports whether a request starting at t may run, and whether it
	// is measured.
	admit := func(t time.Time) (run, measured bool) {
		if ctx.Err() != nil || !deadline.IsZero() && !t.Before(deadline) {
			return false, false
		}
		if t.Before(measureStart) {
			return true, false
		}
		if opts.Requests > 0 && claimed.Add(1) > int64(opts.Requests) {
			return false, false
		}
		return true, true
	}

	workers := make([]*worker, opts.Conns)
	for i := range workers {
		h := opts.Request.Header.Clone()
		if opts.ConnHeader != nil {
			if h == nil {
				h = http.Header{}
			}
			for k, v := range opts.ConnHeader(i) {
				h[k] = v
			}
		}
		workers[i] = &worker{conn: i, header: h, lat: NewHistogram(), ttfb: NewHistogram(), buf: make([]byte, 32<<10)}
	}
	var wg sync.WaitGroup
	var lastDone atomic.Int64
	if opts.Rate > 0 {
		runOpenLoop(ctx, client, opts, workers, admit, &wg, &lastDone)
	} else {
		for _, w := range workers {
			wg.Go(func() {
				for sent := 0; opts.PerConn <= 0 || sent < opts.PerConn; sent++ {
					start := time.Now()
					run, measured := admit(start)
					if !run {
						return
					}
					w.do(ctx, client, opts, start, measured)
					if measured {
						storeMax(&lastDone, time.Now().UnixNano())
					}
				}
			})
		}
	}
	wg.Wait()

	res := Result{Latency: NewHistogram(), TTFB: NewHistogram()}
	for _, w := range workers {
		res.Latency.Merge(w.lat)
		res.TTFB.Merge(w.ttfb)
		res.Requests += w.ok
		res.Errors += w.errs
		res.Bytes += w.bytes
		res.Degraded += w.degraded
		res.DegradedHistory += w.degradedHistory
		if res.FirstError == "" && w.firstErr != nil {
			res.FirstError = w.firstErr.Error()
		}
	}
	if end := lastDone.Load(); end > 0 {
		res.Elapsed = time.Unix(0, end).Sub(measureStart)
	}
	if err := ctx.Err(); err != nil && res.Requests+res.Errors == 0 {
		return res, fmt.Errorf("loadgen: %w", err)
	}
	return res, nil
}

// runOpenLoop schedules requests at opts.Rate and hands their scheduled start
// times to the workers; a request waiting for a free worker has its wait
// counted in its latency.
func runOpenLoop(ctx context.Context, client *http.Client, opts Options, workers []*worker,
	admit func(time.Time) (bool, bool), wg *sync.WaitGroup, lastDone *atomic.Int64) {
	type slot struct {
		at       time.Time
		measured bool
	}
	queue := make(chan slot, 1<<16)
	for _, w := range workers {
		wg.Go(func() {
			for s := range queue {
				w.do(ctx, client, opts, s.at, s.measured)
				if s.measured {
					storeMax(lastDone, time.Now().UnixNano())
				}
			}
		})
	}
	interval := time.Duration(float64(time.Second) / opts.Rate)
	start := time.Now()
	defer close(queue)
	for i := int64(0); ; i++ {
		at := start.Add(time.Duration(i) * interval)
		run, measured := admit(at)
		if !run {
			return
		}
		if d := time.Until(at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case queue <- slot{at: at, measured: measured}:
		case <-ctx.Done():
			return
		}
	}
}

// do sends one request and records it when measured.
func (w *worker) do(ctx context.Context, client *http.Client, opts Options, start time.Time, measured bool) {
	ttfb, n, degraded, err := w.send(ctx, client, opts, start)
	if !measured {
		return
	}
	if err != nil {
		w.errs++
		if w.firstErr == nil {
			w.firstErr = err
		}
		return
	}
	w.ok++
	w.bytes += uint64(n)
	if history, anyPart := DegradedParts(degraded); anyPart {
		w.degraded++
		if history {
			w.degradedHistory++
		}
	}
	w.ttfb.Record(ttfb)
	w.lat.Record(time.Since(start))
}

var done = []byte("data: [DONE]")

// send performs one request, reading the whole body; it returns the time to
// the first body byte, the body size and the response's DegradedHeader.
func (w *worker) send(ctx context.Context, client *http.Client, opts Options, start time.Time) (time.Duration, int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r := opts.Request
	body, extra := r.Body, http.Header(nil)
	if opts.Vary != nil {
		var b []byte
		if b, extra = opts.Vary(w.conn, w.seq); b != nil {
			body = b
		}
	}
	w.seq++
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", fmt.Errorf("build request: %w", err)
	}
	for k, v := range w.header {
		req.Header[k] = v
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, "", fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	var ttfb time.Duration
	total := 0
	tail := make([]byte, 0, 2*len(done))
	for {
		n, err := resp.Body.Read(w.buf)
		if n > 0 {
			if total == 0 {
				ttfb = time.Since(start)
			}
			total += n
			tail = appendTail(tail, w.buf[:n], cap(tail))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, total, "", fmt.Errorf("read body: %w", err)
		}
	}
	if resp.StatusCode/100 != 2 {
		return 0, total, "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if opts.Stream && !bytes.Contains(tail, done) {
		return 0, total, "", errors.New("stream did not end with data: [DONE]")
	}
	return ttfb, total, resp.Header.Get(DegradedHeader), nil
}

// appendTail keeps the last limit bytes of what was read.
func appendTail(tail, p []byte, limit int) []byte {
	if len(p) >= limit {
		return append(tail[:0], p[len(p)-limit:]...)
	}
	if over := len(tail) + len(p) - limit; over > 0 {
		tail = append(tail[:0], tail[over:]...)
	}
	return append(tail, p...)
}

// storeMax raises v to x if x is larger.
func storeMax(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
