package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Gateway metrics the benchmark reads (internal/engine/record and the Go runtime).
const (
	mCaptured    = "memgate_capture_captured_total"
	mWorkerSaved = "memgate_capture_saved_total"
	mWorkerDup   = "memgate_capture_duplicates_total"
	mErased      = "memgate_capture_erased_total"
	mPoison      = "memgate_capture_poison_total"
	mDirectSaved = "memgate_capture_direct_saved_total" // duplicates included
	mDirectDup   = "memgate_capture_direct_duplicates_total"
	mDropped     = "memgate_capture_dropped_total"
	mDead        = "memgate_capture_dead_letters_total"        // refused by the store, set aside
	mWorkerDead  = "memgate_capture_worker_dead_letters_total" // the same, from the capture queue
	// The lag reported is enrichment's: capture to the end of the
	// after-save hooks (storing is on the request path).
	mLagBucket  = `memgate_enrich_lag_seconds_bucket{le="`
	mLagSum     = "memgate_enrich_lag_seconds_sum"
	mLagCount   = "memgate_enrich_lag_seconds_count"
	mHeapInuse  = "go_memstats_heap_inuse_bytes"
	mGoroutines = "go_goroutines"
)

// metrics is one scrape of /metrics: series (name plus labels, as printed)
// to value.
type metrics map[string]float64

// scrapeMetrics reads the gateway's /metrics.
func scrapeMetrics(ctx context.Context, s *server) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.rootURL()+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: status %d", resp.StatusCode)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return m, nil
}

// persisted is how many captured exchanges reached the store (duplicates
// included: they were already there).
func (m metrics) persisted() float64 {
	return m[mWorkerSaved] + m[mWorkerDup] + m[mDirectSaved]
}

// stored is how many exchanges were newly written to the store.
func (m metrics) stored() float64 {
	return m[mWorkerSaved] + m[mDirectSaved] - m[mDirectDup]
}

// lost is how many exchanges will never be stored: dropped, undecodable,
// erased, or refused by the store (dead letters).
func (m metrics) lost() float64 {
	return m[mDropped] + m[mPoison] + m[mErased] + m[mDead] + m[mWorkerDead]
}

// drained reports whether every captured exchange is stored or accounted
// for as lost.
func (m metrics) drained() bool { return m.persisted()+m.lost() >= m[mCaptured] }

// lagBuckets returns the capture lag histogram's cumulative buckets, by
// upper bound.
func (m metrics) lagBuckets() map[float64]float64 {
	out := map[float64]float64{}
	for k, v := range m {
		if le, ok := strings.CutPrefix(k, mLagBucket); ok {
			le = strings.TrimSuffix(le, `"}`)
			if f, err := strconv.ParseFloat(le, 64); err == nil {
				out[f] = v
			}
		}
	}
	return out
}

// captureStat is what capture did during one memory-on cell (or the
// sustained run): from the start of its load until the backlog was stored.
type captureStat struct {
	exchanges float64       // captured during the load
	persisted float64       // reached the store by the end of the drain
	lost      float64       // dropped, poison or erased
	backlog   float64       // captured but not yet persisted when the load ended
	atLoadEnd float64       // persisted by the end of the load
	load      time.Duration // the load's wall time, warm-up included
	drain     time.Duration // load end → everything persisted
	drained   bool          // false: the drain timed out
	lagMean   time.Duration // exchange → enriched (after-save hooks done)
	lagP50    float64       // upper bound (seconds) of the bucket holding the median; 0 when unknown
	lagP99    float64
}

// turnsPerSecond is the persisted exchanges per second of load plus drain.
func (c captureStat) turnsPerSecond() float64 {
	if d := c.load + c.drain; d > 0 {
		return c.persisted / d.Seconds()
	}
	return 0
}

// drainRate is the exchanges persisted per second after the load ended.
func (c captureStat) drainRate() float64 {
	if c.drain <= 0 {
		return 0
	}
	return (c.persisted - c.atLoadEnd) / c.drain.Seconds()
}

// captureWatch measures capture across a stretch of load.
type captureWatch struct {
	s      *server
	start  time.Time
	before metrics
}

// watchCapture snapshots s's capture metrics as load is about to begin.
func watchCapture(ctx context.Context, s *server) (*captureWatch, error) {
	m, err := scrapeMetrics(ctx, s)
	if err != nil {
		return nil, err
	}
	return &captureWatch{s: s, start: time.Now(), before: m}, nil
}

// finish is called when the load has ended: it waits (up to timeout) until
// every exchange captured so far is persisted, and reports.
func (w *captureWatch) finish(ctx context.Context, timeout time.Duration) (captureStat, error) {
	loadEnd := time.Now()
	atEnd, err := scrapeMetrics(ctx, w.s)
	if err != nil {
		return captureStat{}, err
	}
	last, drained, err := waitDrained(ctx, w.s, atEnd, timeout)
	if err != nil {
		return captureStat{}, err
	}
	drainEnd := time.Now()
	if atEnd.drained() {
		drainEnd = loadEnd
	}
	b := w.before
	st := captureStat{
		exchanges: atEnd[mCaptured] - b[mCaptured],
		persisted: last.persisted() - b.persisted(),
		lost:      last.lost() - b.lost(),
		backlog:   max(0, atEnd[mCaptured]-atEnd.persisted()-atEnd.lost()),
		atLoadEnd: atEnd.persisted() - b.persisted(),
		load:      loadEnd.Sub(w.start),
		drain:     drainEnd.Sub(loadEnd),
		drained:   drained,
	}
	if n := last[mLagCount] - b[mLagCount]; n > 0 {
		st.lagMean = time.Duration((last[mLagSum] - b[mLagSum]) / n * float64(time.Second))
		st.lagP50 = bucketQuantile(b.lagBuckets(), last.lagBuckets(), 0.5)
		st.lagP99 = bucketQuantile(b.lagBuckets(), last.lagBuckets(), 0.99)
	}
	return st, nil
}

// waitDrained polls s's metrics until the capture backlog is empty or
// timeout passes. It returns the last scrape and whether it drained.
func waitDrained(ctx context.Context, s *server, m metrics, timeout time.Duration) (metrics, bool, error) {
	deadline := time.Now().Add(timeout)
	for !m.drained() {
		if time.Now().After(deadline) {
			return m, false, nil
		}
		select {
		case <-ctx.Done():
			return m, false, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
		var err error
		if m, err = scrapeMetrics(ctx, s); err != nil {
			return m, false, err
		}
	}
	return m, true, nil
}

// bucketQuantile returns the upper bound of the histogram bucket holding
// quantile q of the observations made between two scrapes.
func bucketQuantile(before, after map[float64]float64, q float64) float64 {
	les := make([]float64, 0, len(after))
	for le := range after {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 {
		return 0
	}
	total := after[les[len(les)-1]] - before[les[len(les)-1]]
	if total <= 0 {
		return 0
	}
	for _, le := range les {
		if after[le]-before[le] >= q*total {
			return le
		}
	}
	return les[len(les)-1]
}

// storedMessages sums the message counts of user's conversations through
// the management API: the store's own account of what capture persisted.
func storedMessages(ctx context.Context, s *server, user string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.baseURL+"/memory/conversations?user="+user, nil)
	if err != nil {
		return 0, fmt.Errorf("conversations request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("list conversations: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("list conversations: status %d", resp.StatusCode)
	}
	var body struct {
		Data []struct {
			MessageCount int `json:"message_count"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("decode conversations: %w", err)
	}
	n := 0
	for _, c := range body.Data {
		n += c.MessageCount
	}
	return n, nil
}

// storeCheck compares, for one gateway, the messages its store holds with
// what the capture metrics say was stored.
type storeCheck struct {
	server    string
	users     int
	messages  int     // counted through the management API
	exchanges float64 // newly stored exchanges, from the metrics
}

// checkStore counts what s's store holds for users after draining capture.
func checkStore(ctx context.Context, s *server, name string, users []string, timeout time.Duration) (storeCheck, error) {
	m, err := scrapeMetrics(ctx, s)
	if err != nil {
		return storeCheck{}, err
	}
	if m, _, err = waitDrained(ctx, s, m, timeout); err != nil {
		return storeCheck{}, err
	}
	c := storeCheck{server: name, users: len(users), exchanges: m.stored()}
	for _, u := range users {
		n, err := storedMessages(ctx, s, u)
		if err != nil {
			return storeCheck{}, fmt.Errorf("user %s: %w", u, err)
		}
		c.messages += n
	}
	return c, nil
}
