package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Markers delimit the sections this command owns in BENCHMARKS.md; the rest
// of the file (other suites' sections, prose) is left as it is.
const (
	overheadStart = "<!-- bench:overhead:start -->"
	overheadEnd   = "<!-- bench:overhead:end -->"
	goBenchStart  = "<!-- bench:gobench:start -->"
	goBenchEnd    = "<!-- bench:gobench:end -->"
)

// fileHeader starts a new BENCHMARKS.md.
const fileHeader = "# memgate benchmarks\n\n" +
	"Everything below is written by `make bench` (`go run ./bench/cmd/bench`); rerun it to refresh the numbers.\n\n"

// report renders a run's results.
type report struct {
	cfg      config
	machine  machine
	cells    []cell
	loadWall time.Duration
	goBench  string
}

// find returns the cell for target at conns.
func (r report) find(target string, conns int) (cell, bool) {
	for _, c := range r.cells {
		if c.target == target && c.conns == conns {
			return c, true
		}
	}
	return cell{}, false
}

// overheadSection renders the proxy overhead section, markers included.
func (r report) overheadSection() string {
	var b strings.Builder
	b.WriteString(overheadStart + "\n## Proxy overhead\n\n")
	fmt.Fprintf(&b, "- Date: %s\n", r.machine.date)
	fmt.Fprintf(&b, "- Machine: %s, %d logical CPUs (`nproc`), Linux %s\n", r.machine.cpu, r.machine.nproc, r.machine.kernel)
	fmt.Fprintf(&b, "- Go: %s\n", r.machine.goVersion)
	if r.machine.loadavg != "" {
		fmt.Fprintf(&b, "- Load average before the run (1/5/15 min): %s — anything well above 0 means other work shared the CPUs\n", r.machine.loadavg)
	}
	fmt.Fprintf(&b, "- Command: `%s`\n", r.cfg.command)
	mode := "closed loop (each connection sends its next request when the last one ends)"
	if r.cfg.rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f req/s per cell, latency from each request's scheduled start", r.cfg.rate)
	}
	repeat := ""
	if r.cfg.repeat > 1 {
		repeat = fmt.Sprintf(" (each cell run %d times, the run with the median req/s reported)", r.cfg.repeat)
	}
	fmt.Fprintf(&b, "- Load: %s; %v measured after %v warm-up per cell%s; fake upstream latency %v, %d content deltas per stream; load phase took %v\n",
		mode, r.cfg.duration, r.cfg.warmup, repeat, r.cfg.latency, r.cfg.chunks, r.loadWall.Round(time.Second))
	b.WriteString("\nTargets, all in front of the same fake upstream process:\n\n" +
		"- **direct** — the fake upstream itself: the floor.\n" +
		"- **httputil** — a bare `net/http/httputil.ReverseProxy` (defaults: `http.DefaultTransport`, which keeps only 2 idle connections per host) in its own process.\n" +
		"- **memgate** — `gateway serve` with `X-Memory-Mode: off` (pass-through).\n" +
		"- **memgate-memory** (when selected) — `X-Memory-Mode: on`, SQLite store, one conversation per connection, warmed up by the warm-up period: history is loaded, injected and every exchange captured.\n" +
		"- **\\*-stream** — the same with `\"stream\": true` (SSE, usage chunk, `[DONE]`); latency is to the last byte, TTFB to the first.\n\n" +
		"Columns: *+p50/+p99* is the latency added over the floor at the same concurrency (direct, or direct-stream for streams); " +
		"*÷ httputil* compares with the bare proxy at the same concurrency (req/s ratio: higher is better; p50 ratio: lower is better); " +
		"*CPU/req* is the serving process's user+system CPU per request (the upstream's for direct, the proxy's alone otherwise); *RSS* after the cell.\n\n")
	b.WriteString("| target | conns | req/s | p50 | p99 | p99.9 | +p50 | +p99 | req/s ÷ httputil | p50 ÷ httputil | TTFB p50 | CPU/req | RSS MB | errors |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range r.cells {
		l := c.res.Latency
		row := []string{
			c.target, fmt.Sprint(c.conns), fmt.Sprintf("%.0f", c.res.RPS()),
			fmtDur(l.Quantile(0.5)), fmtDur(l.Quantile(0.99)), fmtDur(l.Quantile(0.999)),
		}
		if f, ok := r.find(floorOf(c.target), c.conns); ok && f.target != c.target {
			row = append(row, fmtDelta(l.Quantile(0.5)-f.res.Latency.Quantile(0.5)),
				fmtDelta(l.Quantile(0.99)-f.res.Latency.Quantile(0.99)))
		} else {
			row = append(row, "—", "—")
		}
		if base, ok := r.find(baselineOf(c.target), c.conns); ok {
			row = append(row, fmt.Sprintf("%.2f×", c.res.RPS()/base.res.RPS()),
				fmt.Sprintf("%.2f×", float64(l.Quantile(0.5))/float64(base.res.Latency.Quantile(0.5))))
		} else {
			row = append(row, "—", "—")
		}
		ttfb := "—"
		if streaming(c.target) {
			ttfb = fmtDur(c.res.TTFB.Quantile(0.5))
		}
		row = append(row, ttfb, fmtDur(c.cpuPerReq), fmt.Sprintf("%.1f", float64(c.rss)/(1<<20)), fmt.Sprint(c.res.Errors))
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	if r.proxyStreamErrors() {
		b.WriteString("\nErrors on *httputil-stream* are the bare proxy's, not the load generator's: its `http.Server` closes the inbound " +
			"request body once response headers are written while `http.Transport` may still be reading it, which tears down the " +
			"upstream connection mid-stream (\"ReverseProxy read error during body copy: use of closed network connection\", golang/go#40747).\n")
	}
	if goals := r.goals(); goals != "" {
		b.WriteString("\n" + goals)
	}
	b.WriteString("\n" + r.machine.coresNote() + "\n" + overheadEnd + "\n")
	return b.String()
}

// proxyStreamErrors reports whether the bare proxy failed streamed requests.
func (r report) proxyStreamErrors() bool {
	for _, c := range r.cells {
		if c.target == "httputil-stream" && c.res.Errors > 0 {
			return true
		}
	}
	return false
}

// goals checks issue #2's targets for memgate pass-through against the bare
// proxy and the floor, for the concurrencies that were measured.
func (r report) goals() string {
	var lines []string
	check := func(ok bool, format string, args ...any) {
		mark := "✅"
		if !ok {
			mark = "❌"
		}
		lines = append(lines, fmt.Sprintf("- %s "+format, append([]any{mark}, args...)...))
	}
	if m, ok := r.find("memgate", 64); ok {
		if b, ok := r.find("httputil", 64); ok {
			rps := m.res.RPS() / b.res.RPS()
			p50 := float64(m.res.Latency.Quantile(0.5)) / float64(b.res.Latency.Quantile(0.5))
			check(rps >= 1.6, "64 conns: memgate serves %.2f× the bare proxy's req/s (goal ≥ 1.6×)", rps)
			check(p50 <= 0.6, "64 conns: memgate p50 is %.2f× the bare proxy's (goal ≤ 0.6×)", p50)
		}
	}
	if m, ok := r.find("memgate", 1); ok {
		if f, ok := r.find("direct", 1); ok {
			d50 := m.res.Latency.Quantile(0.5) - f.res.Latency.Quantile(0.5)
			d99 := m.res.Latency.Quantile(0.99) - f.res.Latency.Quantile(0.99)
			check(d50 <= 100*time.Microsecond, "1 conn: memgate adds %s at p50 over the floor (goal ≤ 100µs)", fmtDelta(d50))
			check(d99 <= 500*time.Microsecond, "1 conn: memgate adds %s at p99 over the floor (goal ≤ 500µs)", fmtDelta(d99))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "Goals (issue #2):\n\n" + strings.Join(lines, "\n") + "\n"
}

// goBenchSection renders the Go micro-benchmark output, markers included.
func (r report) goBenchSection() string {
	if r.goBench == "" {
		return ""
	}
	return goBenchStart + "\n## Go micro-benchmarks\n\n" +
		"`go test -run '^$' -bench . -benchmem " + strings.Join(r.cfg.goBenchPkg, " ") + "` (token counting: MB/s of message text and msgs/s; proxy: allocations per request).\n\n" +
		"```\n" + strings.TrimSpace(r.goBench) + "\n```\n" + goBenchEnd + "\n"
}

// updateFile writes the sections into path, replacing earlier versions of
// them and keeping everything else.
func updateFile(path string, sections ...string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(old)) == 0 {
		old = []byte(fileHeader)
	}
	doc := string(old)
	for _, s := range sections {
		if s != "" {
			doc = replaceSection(doc, s)
		}
	}
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// replaceSection puts section (which starts with its start marker and ends
// with its end marker) in place of the same-marked section of doc, or
// appends it.
func replaceSection(doc, section string) string {
	start, _, _ := strings.Cut(section, "\n")
	end := strings.TrimSpace(section[strings.LastIndex(strings.TrimSpace(section), "\n")+1:])
	i := strings.Index(doc, start)
	j := strings.Index(doc, end)
	if i >= 0 && j > i {
		rest := strings.TrimPrefix(doc[j+len(end):], "\n")
		return doc[:i] + section + rest
	}
	if !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + section
}

// fmtDur renders a latency compactly (µs below 10 ms).
func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d >= 10*time.Microsecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}

// fmtDelta renders a signed latency difference.
func fmtDelta(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}
