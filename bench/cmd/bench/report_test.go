package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFold(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		args     []string
		ok       bool
		want     []string
	}{
		{"appends a new section", "# memgate benchmarks\n\nintro\n", []string{"-section", "search"}, true,
			[]string{"intro\n\n<!-- bench:search:start -->\n## Search\nnew table\n<!-- bench:search:end -->\n"}},
		{"replaces the earlier version", "# b\n\n<!-- bench:search:start -->\nold\n<!-- bench:search:end -->\n\n<!-- eval:start -->\nkept\n<!-- eval:end -->\n",
			[]string{"-section", "search"}, true,
			[]string{"<!-- bench:search:start -->\n## Search\nnew table\n<!-- bench:search:end -->\n\n<!-- eval:start -->\nkept"}},
		{"refuses bench's own section", "", []string{"-section", "overhead"}, false, nil},
		{"refuses a bad name", "", []string{"-section", "Search Results"}, false, nil},
		{"needs a file", "", []string{"-section", "search", "-"}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			out, in := filepath.Join(dir, "BENCHMARKS.md"), filepath.Join(dir, "search.md")
			if err := os.WriteFile(out, []byte(tt.existing), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(in, []byte("\n## Search\nnew table\n\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"bench", "fold", "-out", out}, tt.args...)
			if tt.args[len(tt.args)-1] != "-" {
				args = append(args, in)
			}
			err := run(t.Context(), args, func(string) string { return "" }, &strings.Builder{}, &strings.Builder{})
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			doc, _ := os.ReadFile(out)
			for _, w := range tt.want {
				if !strings.Contains(string(doc), w) {
					t.Errorf("BENCHMARKS.md lacks %q:\n%s", w, doc)
				}
			}
			if tt.ok && strings.Count(string(doc), "bench:search:start") != 1 {
				t.Errorf("want exactly one search section:\n%s", doc)
			}
		})
	}
}

// The tables put every number next to its ratio to httputil and its
// latency added over direct, in the same row.
func TestTables(t *testing.T) {
	r := report{cells: []cell{
		{target: "direct", conns: 64, res: fixedResult(8000, 1*time.Millisecond)},
		{target: "httputil", conns: 64, res: fixedResult(2000, 10*time.Millisecond)},
		{target: "memgate", conns: 64, res: fixedResult(4000, 4*time.Millisecond)},
		{target: "memgate-memory-pg", conns: 64, res: degradedResult(fixedResult(1000, 20*time.Millisecond), 250, 100),
			capture: &captureStat{exchanges: 4000, persisted: 4000, backlog: 1000, load: 4 * time.Second, drain: time.Second, drained: true,
				lagMean: 200 * time.Millisecond, lagP50: 0.08, lagP99: 1.28}},
		{target: "memgate-memory-stream", conns: 64, res: degradedResult(fixedResult(2000, 6*time.Millisecond), 8, 0),
			capture: &captureStat{exchanges: 2000, persisted: 2000, drained: true}},
		{target: "direct-stream", conns: 64, res: fixedResult(6000, 2*time.Millisecond)},
		{target: "memgate-stream", conns: 64, res: fixedResult(3000, 5*time.Millisecond)},
	}}
	plain, stream, capture := r.table(false), r.table(true), r.captureSection()
	tests := []struct {
		name, text, want string
	}{
		{"ratios and added latency", plain, "| memgate | 64 | 4000 (2.00×) | 4.00ms (0.40×) | 4.00ms (0.40×) | 4.00ms (0.40×) | +3.00ms / +3.00ms / +3.00ms |"},
		{"the floor adds nothing", plain, "| direct | 64 | 8000 (4.00×) | 1.00ms (0.10×) | 1.00ms (0.10×) | 1.00ms (0.10×) | — |"},
		{"memory on PostgreSQL, flagged degraded", plain, "| memgate-memory-pg ⚠ 25% degraded | 64 | 1000 (0.50×) |"},
		{"under 10 % with a decimal", stream, "| memgate-memory-stream ⚠ 0.4% degraded | 64 |"},
		{"capture row under 1 %", capture, "| memgate-memory-stream | 64 | 2000 | 0% / 0.4% |"},
		{"streams without a bare proxy have no ratio", stream, "| memgate-stream | 64 | 3000 | 5.00ms | 5.00ms | 5.00ms | +3.00ms / +3.00ms / +3.00ms |"},
		{"capture row", capture, "| memgate-memory-pg | 64 | 4000 | 10% / 25% | 1000 | 1.00s | **800** | 200ms | 80ms | 1.28s | 0 |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.text, tt.want) {
				t.Errorf("lacks %q:\n%s", tt.want, tt.text)
			}
		})
	}
	if strings.Contains(plain, "| memgate ⚠") {
		t.Errorf("a cell without degraded responses is flagged:\n%s", plain)
	}
	if strings.Contains(plain, "-stream") || strings.Contains(stream, "| memgate | ") {
		t.Errorf("streams and non-streams mixed:\n%s\n%s", plain, stream)
	}
}

func TestRSSSection(t *testing.T) {
	var u sustained
	u.conns = 64
	for i := 1; i <= rssStretches; i++ {
		u.samples = append(u.samples, rssSample{requests: uint64(i * 10000), rps: 500, p99: 50 * time.Millisecond,
			rss: int64(100+i) << 20, anon: int64(40+i) << 20, file: 60 << 20, heapInuse: 30 << 20, goroutines: 80})
	}
	u.afterDrain = rssSample{requests: 100000, rss: 111 << 20}
	u.degraded, u.degradedHistory = 700, 30
	u.capture = captureStat{exchanges: 100000, persisted: 60000, atLoadEnd: 50000, load: 200 * time.Second, drain: 30 * time.Second}
	got := report{sustained: u}.rssSection()
	for _, want := range []string{
		"| 10000 | 500 | 50.0ms | 101.0 | 41.0 | 60.0 | 30.0 | 80 | 0 |",
		"| after the capture drain | — | — | 111.0 |",
		"RSS after 10000 requests 101.0 MB, after 50000 105.0 MB, after 100000 110.0 MB: last ÷ first = **1.09×**",
		"anonymous memory last ÷ first = **1.22×**, last ÷ middle = 1.11×",
		"40000 still waiting after 30.00s",
		"**261 turns/s persisted**",
		"333 turns/s during the drain alone",
		"**0.7%** of the 100000 successful, <0.1% with the conversation's history left out",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	u.stopped, u.asked, u.budget = true, 200000, 4*time.Minute
	if got := (report{sustained: u}).rssSection(); !strings.Contains(got, "stopped after 100000 of the 200000 requests asked for: its time limit (`-rss-budget 4m0s`)") {
		t.Errorf("a stopped run does not say so:\n%s", got)
	}
	if (report{}).rssSection() != "" {
		t.Error("a run without the sustained stage renders a section")
	}
}

func TestTargets(t *testing.T) {
	cfg, err := parseFlags([]string{"bench"}, func(string) string { return "" }, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target, server, floor, baseline string
		stream, memory                  bool
		repeatsAt1                      int
	}{
		{"direct", "direct", "direct", "httputil", false, false, 3},
		{"httputil-stream", "httputil", "direct-stream", "httputil-stream", true, false, 3},
		{"memgate", "memgate", "direct", "httputil", false, false, 3},
		{"memgate-memory", "memgate", "direct", "httputil", false, true, 1},
		{"memgate-memory-pg", "memgate-pg", "direct", "httputil", false, true, 1},
		{"memgate-memory-pg-stream", "memgate-pg", "direct-stream", "httputil-stream", true, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			if got := serverOf(tt.target); got != tt.server {
				t.Errorf("server %q, want %q", got, tt.server)
			}
			if floorOf(tt.target) != tt.floor || baselineOf(tt.target) != tt.baseline {
				t.Errorf("floor %q baseline %q", floorOf(tt.target), baselineOf(tt.target))
			}
			if streaming(tt.target) != tt.stream || memoryOn(tt.target) != tt.memory {
				t.Errorf("stream %v memory %v", streaming(tt.target), memoryOn(tt.target))
			}
			if got := cfg.repeats(tt.target, 1); got != tt.repeatsAt1 {
				t.Errorf("repeats at 1 conn = %d, want %d", got, tt.repeatsAt1)
			}
			if got := cfg.repeats(tt.target, 64); got != 1 {
				t.Errorf("repeats at 64 conns = %d, want 1", got)
			}
		})
	}
	if len(cfg.targets) != len(allTargets) || !cfg.sustainedRun() || cfg.postgresURL != defaultPostgres {
		t.Errorf("defaults: targets %v, sustained %v, postgres %q", cfg.targets, cfg.sustainedRun(), cfg.postgresURL)
	}
}

func TestGoBench(t *testing.T) {
	out := "pkg: github.com/memgate/memgate/cmd/gateway\n" +
		"BenchmarkTokensCurve-2   \t       1\t 51234 ns/op\t      5000 full@10\t      5000 sent@10\t     51000 full@100\t      7400 sent@100\t    520000 full@1000\t      7900 sent@1000\n" +
		"BenchmarkPrepare/on-2    \t    1000\t 250000 ns/op\n"
	pts := tokenCurve(out)
	want := []curvePoint{{10, 5000, 5000}, {100, 7400, 51000}, {1000, 7900, 520000}}
	if len(pts) != len(want) {
		t.Fatalf("points %v, want %v", pts, want)
	}
	for i := range want {
		if pts[i] != want[i] {
			t.Errorf("point %d = %+v, want %+v", i, pts[i], want[i])
		}
	}
	r := report{goBench: out}
	r.cfg.goBenchPkg = []goBenchPkg{parseGoBench("./internal/tokens/"), parseGoBench("./cmd/gateway/=^Benchmark(TokensCurve|Prepare)$")}
	sec := r.goBenchSection()
	for _, s := range []string{
		"`go test -run ^$ -bench . -benchmem ./internal/tokens/`",
		"`go test -run ^$ -bench ^Benchmark(TokensCurve|Prepare)$ -benchmem ./cmd/gateway/`",
		"| 1000 | 520000 | 7900 | 0.02× |",
		goBenchStart, goBenchEnd,
	} {
		if !strings.Contains(sec, s) {
			t.Errorf("section lacks %q:\n%s", s, sec)
		}
	}
	if tokenCurve("BenchmarkText-2 100 5 ns/op") != nil {
		t.Error("points from a run without the token curve")
	}
}
