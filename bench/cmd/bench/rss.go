package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/memgate/memgate/bench/loadgen"
)

// rssSample is the gateway's memory after some number of requests of the
// sustained run.
type rssSample struct {
	requests   uint64 // successful requests so far
	errors     uint64
	rps        float64 // of the stretch that ended here
	p99        time.Duration
	rss        int64 // resident set, bytes
	anon, file int64 // rss split: anonymous and file-backed
	heapInuse  float64
	goroutines float64
}

// sustained is the result of the sustained memory-on run.
type sustained struct {
	conns   int
	asked   int           // requests asked for
	budget  time.Duration // time limit of the load
	stopped bool          // the budget ran out before the requests were sent
	samples []rssSample
	// degraded is the successful requests answered with X-Memory-Degraded
	// (loadgen.Result.Degraded), degradedHistory those with the
	// conversation's history left out.
	degraded, degradedHistory uint64
	capture                   captureStat
	// afterDrain is the sample taken once the capture backlog was stored.
	afterDrain rssSample
}

// rssStretches is how many times the sustained run samples the gateway.
const rssStretches = 10

// runSustained sends cfg.rssRequests memory-on requests to s (the SQLite
// gateway) in rssStretches stretches, sampling the process's RSS, Go heap
// and goroutines after each, then waits for capture to store the backlog.
func runSustained(ctx context.Context, cfg config, s *server, stderr io.Writer) (sustained, error) {
	out := sustained{conns: cfg.rssConns, asked: cfg.rssRequests, budget: cfg.rssBudget}
	deadline := time.Now().Add(cfg.rssBudget)
	watch, err := watchCapture(ctx, s)
	if err != nil {
		return out, err
	}
	per := max(cfg.rssRequests/rssStretches, 1)
	var done, errs uint64
	for i := range rssStretches {
		n := per
		if i == rssStretches-1 {
			n = cfg.rssRequests - per*(rssStretches-1)
		}
		if n <= 0 {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			out.stopped = true
			break
		}
		res, err := loadgen.Run(ctx, loadgen.Options{
			Request:  chatRequest(s, false, memoryOnHeader()),
			Conns:    cfg.rssConns,
			Requests: n,
			Duration: left,
			Vary:     func(conn, seq int) ([]byte, http.Header) { return varySustained(conn, int(done)+seq) },
		})
		if err != nil {
			return out, fmt.Errorf("sustained run: %w", err)
		}
		done += res.Requests
		errs += res.Errors
		out.degraded += res.Degraded
		out.degradedHistory += res.DegradedHistory
		smp, err := sample(ctx, s)
		if err != nil {
			return out, err
		}
		smp.requests, smp.errors, smp.rps, smp.p99 = done, errs, res.RPS(), res.Latency.Quantile(0.99)
		out.samples = append(out.samples, smp)
		fmt.Fprintf(stderr, "sustained  %7d requests  %6.0f req/s  RSS %.1f MB  heap %.1f MB  goroutines %.0f\n",
			done, smp.rps, mb(smp.rss), smp.heapInuse/(1<<20), smp.goroutines)
		if res.Requests+res.Errors < uint64(n) {
			out.stopped = true
			break
		}
	}
	if out.capture, err = watch.finish(ctx, cfg.rssDrain); err != nil {
		return out, err
	}
	if out.afterDrain, err = sample(ctx, s); err != nil {
		return out, err
	}
	out.afterDrain.requests, out.afterDrain.errors = done, errs
	return out, nil
}

// sample reads the process's RSS and the Go runtime's heap and goroutines.
func sample(ctx context.Context, s *server) (rssSample, error) {
	st, err := s.stats()
	if err != nil {
		return rssSample{}, err
	}
	anon, file, err := s.rssSplit()
	if err != nil {
		return rssSample{}, err
	}
	m, err := scrapeMetrics(ctx, s)
	if err != nil {
		return rssSample{}, err
	}
	return rssSample{rss: st.rss, anon: anon, file: file, heapInuse: m[mHeapInuse], goroutines: m[mGoroutines]}, nil
}

// ratio is a ÷ b, or 0 when b is 0.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// mb converts bytes to MiB.
func mb(b int64) float64 { return float64(b) / (1 << 20) }

// rssSection renders the sustained run.
func (r report) rssSection() string {
	u := r.sustained
	if len(u.samples) == 0 {
		return ""
	}
	var b strings.Builder
	first, last := u.samples[0], u.samples[len(u.samples)-1]
	fmt.Fprintf(&b, "### Gateway memory under sustained load\n\n"+
		"%d requests with memory on (SQLite store, closed loop, %d connections; each connection is a new user with a new "+
		"conversation every %d turns, about %d users in all, every turn a different message), in %d stretches; after each "+
		"the gateway process's RSS, split into anonymous memory (what the process allocated) and file-backed pages (the binary and "+
		"the memory-mapped SQLite database, which the kernel drops and re-reads as it likes), from /proc, and its Go heap in use "+
		"and goroutines, from its /metrics.\n\n",
		last.requests+last.errors, u.conns, sustainedTurns, int(last.requests+last.errors)/sustainedTurns, len(u.samples))
	b.WriteString("| requests | req/s (stretch) | p99 (stretch) | RSS MB | anonymous MB | file-backed MB | heap in use MB | goroutines | errors |\n" +
		"|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	row := func(label string, s rssSample, rate bool) {
		rps, p99 := "—", "—"
		if rate {
			rps, p99 = fmt.Sprintf("%.0f", s.rps), fmtDur(s.p99)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.0f | %d |\n",
			label, rps, p99, mb(s.rss), mb(s.anon), mb(s.file), s.heapInuse/(1<<20), s.goroutines, s.errors)
	}
	for _, s := range u.samples {
		row(fmt.Sprint(s.requests), s, true)
	}
	row("after the capture drain", u.afterDrain, false)
	mid := u.samples[len(u.samples)/2-1+len(u.samples)%2]
	fmt.Fprintf(&b, "\nRSS after %d requests %.1f MB, after %d %.1f MB, after %d %.1f MB: last ÷ first = **%.2f×**, "+
		"last ÷ middle = %.2f×; anonymous memory last ÷ first = **%.2f×**, last ÷ middle = %.2f×; Go heap in use last ÷ first = %.2f×. ",
		first.requests, mb(first.rss), mid.requests, mb(mid.rss), last.requests, mb(last.rss),
		ratio(last.rss, first.rss), ratio(last.rss, mid.rss), ratio(last.anon, first.anon), ratio(last.anon, mid.anon),
		last.heapInuse/max(first.heapInuse, 1))
	if u.stopped {
		fmt.Fprintf(&b, "The run stopped after %d of the %d requests asked for: its time limit (`-rss-budget %v`) ran out. ",
			last.requests+last.errors, u.asked, u.budget)
	}
	b.WriteString("Memory that levels off between the middle and the end of the run is bounded; growth proportional to the " +
		"requests served would show as a ratio near requests(last) ÷ requests(middle).\n")
	c := u.capture
	drain := fmt.Sprintf("stored %s later", fmtDur(c.drain))
	if !c.drained {
		drain = fmt.Sprintf("%.0f still waiting after %s (the queue is durable: they are stored later)", c.exchanges-c.persisted-c.lost, fmtDur(c.drain))
	}
	fmt.Fprintf(&b, "\nRequests answered with `X-Memory-Degraded` (some of memory left out: it did not load within `memory.load_timeout`): "+
		"**%s** of the %d successful, %s with the conversation's history left out (`history`, `store`, `all`). ",
		fmtShare(ratio(int64(u.degraded), int64(last.requests))), last.requests, fmtShare(ratio(int64(u.degradedHistory), int64(last.requests))))
	stored := 0.0
	if c.exchanges > 0 {
		stored = 100 * c.persisted / c.exchanges
	}
	fmt.Fprintf(&b, "Capture during this run: %.0f exchanges captured, %.0f persisted (**%.1f%% stored by the end of the drain**), %.0f lost; backlog at the end of the load %.0f, %s; "+
		"**%.0f turns/s persisted** over load + drain, %.0f turns/s during the drain alone (the worker without competing load); "+
		"enrichment lag mean %s, p50 ≤ %s, p99 ≤ %s.\n",
		c.exchanges, c.persisted, stored, c.lost, c.backlog, drain, c.turnsPerSecond(), c.drainRate(),
		fmtDur(c.lagMean), fmtBound(c.lagP50), fmtBound(c.lagP99))
	return b.String()
}

// memoryOnHeader turns memory on; the identity is set per connection.
func memoryOnHeader() http.Header { return http.Header{"X-Memory-Mode": {"on"}} }
