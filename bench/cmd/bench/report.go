package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
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
	cfg       config
	machine   machine
	cells     []cell
	loadWall  time.Duration
	goBench   string
	sustained sustained
	stores    []storeCheck
	fresh     []fresh
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

// howToRead explains the tables; it is part of the written section.
const howToRead = "**How to read this.** Every row is one target at one concurrency, all in front of the same fake upstream, measured in this run. " +
	"*direct* (the upstream alone) is the physical floor: *added* is a target's latency minus direct's at the same concurrency and percentile " +
	"(percentiles do not subtract exactly, so small negative values are noise). " +
	"*httputil*, a plain `httputil.ReverseProxy` with memgate's transport settings, is the baseline memgate is judged against: the ratio next to each number is target ÷ httputil " +
	"at the same concurrency — above 1× is better for req/s, below 1× is better for latency. " +
	"*memgate* is pass-through (`X-Memory-Mode: off`); the *memgate-memory* rows do the real work of memory on every request " +
	"(load the conversation, assemble the prompt within the token budget, capture the exchange), so compare them with *memgate* to see what memory costs. " +
	"On a machine with few cores the load generator, the upstream and the proxy compete for CPU, so absolute numbers move between runs " +
	"while the ratios within a run hold; *CPU/req* is each serving process's own cost. " +
	"A part of a memory-on request's memory that does not load within `memory.load_timeout` (default 150 ms) is left out of its prompt, " +
	"and the response's `X-Memory-Degraded` header lists the parts left out (`history`, `summary`, `facts`, `recall`, `embedding`; " +
	"`store` or `all` when none of memory was used); rows marked ⚠ measured partly that degraded path, and say the share of their " +
	"requests whose response carried the header.\n"

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
	if r.machine.commit != "" {
		fmt.Fprintf(&b, "- Code: commit %s\n", r.machine.commit)
	}
	mode := "closed loop (each connection sends its next request when the last one ends)"
	if r.cfg.rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f req/s per cell, latency from each request's scheduled start", r.cfg.rate)
	}
	repeat := ""
	if r.cfg.repeat > 1 || r.cfg.repeatSingle > 1 {
		repeat = fmt.Sprintf(" (each cell run %d times, 1-connection cells %d times; the run with the median req/s reported)", r.cfg.repeat, r.cfg.repeatSingle)
	}
	fmt.Fprintf(&b, "- Load: %s; %v measured after %v warm-up per cell%s, each started once the server processes were idle (under 5%% of a CPU over 200ms, waiting up to 60s: a memory-on cell leaves its capture hooks running); fake upstream latency %v, %d content deltas per stream; load phase took %v\n",
		mode, r.cfg.duration, r.cfg.warmup, repeat, r.cfg.latency, r.cfg.chunks, r.loadWall.Round(time.Second))
	b.WriteString("\nTargets, all in front of the same fake upstream process:\n\n" +
		"- **direct** — the fake upstream itself: the floor.\n" +
		"- **httputil** — a plain `net/http/httputil.ReverseProxy` on `net/http`'s server in its own process, given the same `http.Transport` settings as memgate (`internal/proxy/upstream`: idle connections per host sized to concurrency, the same timeouts): the baseline. memgate runs the same stack; its distance from this row is memgate's own work (request ids, metrics, JSON parsing and validation of the chat body, breaker and retry layers).\n" +
		"- **memgate** — `gateway serve` with `X-Memory-Mode: off` (pass-through).\n" +
		fmt.Sprintf("- **memgate-memory** — `X-Memory-Mode: on` on the embedded SQLite store, default configuration; %s "+
			"with one conversation holding at least %d turns before it is measured, and every turn is a different message: memory is loaded "+
			"(recent turns, summary, facts, recalled passages), the prompt assembled within the budget, and the exchange captured; "+
			"the capture worker then indexes it for recall, extracts facts and updates the summary, and the fake upstream answers those "+
			"model calls (fact extraction for each exchange, a summary now and then) with a valid JSON reply.\n", spreadText(r.cfg), r.cfg.prefill) +
		"- **memgate-memory-pg** — the same on a second gateway using PostgreSQL + pgvector (a throwaway database) and Redis (hot cache and capture queue, under a unique key prefix).\n" +
		"- **\\*-stream** — the same with `\"stream\": true` (SSE, usage chunk, `[DONE]`); latency is to the last byte, TTFB to the first.\n" +
		historyText(r.cfg) + "\n")
	b.WriteString(howToRead + "\n")
	b.WriteString("### Non-streaming\n\n" + r.table(false) + "\n### Streaming\n\n" + r.table(true))
	if r.proxyStreamErrors() {
		b.WriteString("\nErrors on *httputil-stream* are the plain proxy's, not the load generator's: its `http.Server` closes the inbound " +
			"request body once response headers are written while `http.Transport` may still be reading it, which tears down the " +
			"upstream connection mid-stream (\"ReverseProxy read error during body copy: use of closed network connection\", golang/go#40747).\n")
	}
	if goals := r.goals(); goals != "" {
		b.WriteString("\n" + goals)
	}
	if c := r.captureSection(); c != "" {
		b.WriteString("\n" + c)
	}
	if f := r.freshSection(); f != "" {
		b.WriteString("\n" + f)
	}
	if s := r.rssSection(); s != "" {
		b.WriteString("\n" + s)
	}
	b.WriteString("\n" + r.machine.coresNote() + "\n" + overheadEnd + "\n")
	return b.String()
}

// table renders the streamed or the non-streamed cells.
func (r report) table(stream bool) string {
	var b strings.Builder
	b.WriteString("| target | conns | req/s (÷ httputil) | p50 (÷ httputil) | p99 (÷ httputil) | p99.9 (÷ httputil) | added p50 / p99 / p99.9 |")
	if stream {
		b.WriteString(" TTFB p50 (added) | TTFB p99 (added) |")
	}
	b.WriteString(" CPU/req | RSS MB | errors |\n|---|--:|--:|--:|--:|--:|--:|")
	if stream {
		b.WriteString("--:|--:|")
	}
	b.WriteString("--:|--:|--:|\n")
	qs := []float64{0.5, 0.99, 0.999}
	for _, c := range r.cells {
		if streaming(c.target) != stream {
			continue
		}
		base, hasBase := r.find(baselineOf(c.target), c.conns)
		floor, hasFloor := r.find(floorOf(c.target), c.conns)
		hasFloor = hasFloor && floor.target != c.target
		// ratio renders " (x ÷ the baseline's)", where of reads the number.
		ratio := func(of func(cell) float64) string {
			if !hasBase || of(base) == 0 {
				return ""
			}
			return fmt.Sprintf(" (%.2f×)", of(c)/of(base))
		}
		name := c.target
		if c.res.Degraded > 0 {
			name += " ⚠ " + fmtShare(c.res.DegradedShare()) + " degraded"
		}
		row := []string{name, fmt.Sprint(c.conns),
			fmt.Sprintf("%.0f", c.res.RPS()) + ratio(func(x cell) float64 { return x.res.RPS() })}
		var added []string
		for _, q := range qs {
			v := c.res.Latency.Quantile(q)
			row = append(row, fmtDur(v)+ratio(func(x cell) float64 { return float64(x.res.Latency.Quantile(q)) }))
			if hasFloor {
				added = append(added, fmtDelta(v-floor.res.Latency.Quantile(q)))
			}
		}
		if hasFloor {
			row = append(row, strings.Join(added, " / "))
		} else {
			row = append(row, "—")
		}
		if stream {
			for _, q := range []float64{0.5, 0.99} {
				v := c.res.TTFB.Quantile(q)
				cellText := fmtDur(v)
				if hasFloor {
					cellText += " (" + fmtDelta(v-floor.res.TTFB.Quantile(q)) + ")"
				}
				row = append(row, cellText)
			}
		}
		row = append(row, fmtDur(c.cpuPerReq), fmt.Sprintf("%.1f", mb(c.rss)), fmt.Sprint(c.res.Errors))
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

// captureSection renders what capture did in the memory-on cells.
func (r report) captureSection() string {
	var rows []string
	for _, c := range r.cells {
		if c.capture == nil {
			continue
		}
		st := c.capture
		drain := fmtDur(st.drain)
		if !st.drained {
			drain = "not drained in " + r.cfg.drainTimeout.String()
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %s / %s | %.0f | %s | **%.0f** | %s | %s | %s | %.0f |",
			c.target, c.conns, st.exchanges, fmtShare(c.res.DegradedHistoryShare()), fmtShare(c.res.DegradedShare()), st.backlog, drain, st.turnsPerSecond(),
			fmtDur(st.lagMean), fmtBound(st.lagP50), fmtBound(st.lagP99), st.lost))
	}
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Capture under the overhead load\n\n" +
		"For every memory-on cell (warm-up included): exchanges (turns: the user message and the reply) captured; the share of the " +
		"cell's measured requests *degraded* — answered with `X-Memory-Degraded`, some of memory left out because it did not load " +
		"within `memory.load_timeout`, as counted by the load generator from the responses: *history*, the conversation's recent turns " +
		"(the `history` part, or all of memory: `store`, `all`), and *any* part; the backlog not yet " +
		"in the store when the load stopped; how long after the load the last of them was stored; turns persisted per second over " +
		"load + drain (exchanges are stored on the request path, so this is the gateway's rate); enrichment's lag from the exchange to " +
		"the end of its after-save hooks (`memgate_enrich_lag_seconds`: mean, and the upper bound of the histogram bucket holding p50 and p99); exchanges lost " +
		"(dropped, poison, erased or dead-lettered). Read from the gateway's `/metrics` before and after each cell; the next cell starts once the backlog is stored.\n\n")
	b.WriteString("| target | conns | turns captured | degraded (history / any) | backlog at load end | drained after | turns/s persisted | lag mean | lag p50 ≤ | lag p99 ≤ | lost |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
	if len(r.stores) > 0 {
		b.WriteString("\nCross-check against the stores once the cells' captures were stored (management API, `GET /v1/memory/conversations?user=…` " +
			"for every user of the cells, prefill included, against the exchanges the capture metrics count as newly stored, 2 messages each):\n\n")
		for _, s := range r.stores {
			mark := "✅"
			if float64(s.messages) != 2*s.exchanges {
				mark = "❌"
			}
			fmt.Fprintf(&b, "- %s %s: %d users hold %d messages; capture stored %.0f exchanges.\n",
				mark, s.server, s.users, s.messages, s.exchanges)
		}
	}
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

// goals checks issue #13's target for memgate pass-through against the
// plain reverse proxy on the same transport settings: at 64 connections
// memgate's own work on top of the standard stack stays small.
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
			check(rps >= 0.9, "64 conns: memgate serves %.2f× the plain proxy's req/s (goal ≥ 0.9×)", rps)
			check(p50 <= 1.2, "64 conns: memgate p50 is %.2f× the plain proxy's (goal ≤ 1.2×)", p50)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "Goals (issue #13):\n\n" + strings.Join(lines, "\n") + "\n"
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

// fmtDur renders a latency compactly: three significant digits or so, in µs below 1 ms.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d >= 10*time.Microsecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}

// fmtBound renders a histogram bucket bound given in seconds, or "—".
func fmtBound(sec float64) string {
	switch {
	case sec <= 0:
		return "—"
	case math.IsInf(sec, 1):
		return "∞"
	case sec < 1:
		return fmt.Sprintf("%gms", math.Round(sec*1e6)/1e3)
	}
	return fmt.Sprintf("%gs", sec)
}

// fmtShare renders a share (0 to 1) as a percentage: whole percents from
// 10 %, one decimal below, and "<0.1%" for a share too small to show that
// is not zero, so that a share under the 1 % goal never reads as 0 %.
func fmtShare(s float64) string {
	switch {
	case s <= 0:
		return "0%"
	case s < 0.001:
		return "<0.1%"
	case s < 0.1:
		return fmt.Sprintf("%.1f%%", 100*s)
	}
	return fmt.Sprintf("%.0f%%", 100*s)
}

// fmtDelta renders a signed latency difference.
func fmtDelta(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

// spreadText says how the memory-on cells use their users (see
// memoryTurn).
func spreadText(cfg config) string {
	if cfg.conversations == 0 {
		return "each connection is its own user"
	}
	return fmt.Sprintf("the cells spread their turns over %d users (a cell of fewer connections moves each connection to its next user every turn, "+
		"so each conversation grows slowly from its prefill), each", memoryConversations(cfg))
}

// historyText describes the memory-on client of -history-turns, or nothing.
func historyText(cfg config) string {
	if cfg.historyTurns == 0 {
		return ""
	}
	return fmt.Sprintf("- **Client (memory-on cells)** — `-history-turns %d`: a client that names no conversation and resends its whole history "+
		"(no `X-Memory-Conversation`; the system prompt, every earlier turn answered with the fake upstream's reply, the new message), "+
		"one user per connection, a new chat every %d turns: each chat's first turn goes to the user's default conversation, the next ones to "+
		"the conversation derived from the chat's start (routed, adopting the first turn).\n", cfg.historyTurns, cfg.historyTurns)
}
