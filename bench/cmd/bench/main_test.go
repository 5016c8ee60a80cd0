package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memgate/memgate/bench/loadgen"
)

// TestMain lets the test binary serve as the benchmark's child processes,
// which re-execute os.Executable with roleEnv set.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := serveRole(ctx, role, os.Getenv, os.Stdout)
		stop()
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// End to end: real child processes, real load, a BENCHMARKS.md whose other
// content survives the update.
func TestRunWritesReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and generates load")
	}
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	const keep = "# memgate benchmarks\n\nHand-written intro.\n\n<!-- eval:start -->\nquality table\n<!-- eval:end -->\n"
	if err := os.WriteFile(out, []byte(keep), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	args := []string{"bench", "-out", out, "-targets", "direct,httputil,direct-stream", "-conns", "1,4",
		"-duration", "300ms", "-warmup", "50ms", "-repeat", "2", "-repeat-single", "2", "-gobench=false"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	for _, want := range []string{"Hand-written intro.", "quality table", overheadStart, overheadEnd,
		"| direct | 1 |", "| httputil | 4 |", "| direct-stream | 4 |", "logical CPUs", "-targets direct,httputil,direct-stream"} {
		if !strings.Contains(s, want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(stdout.String(), "| httputil | 1 |") {
		t.Errorf("table not printed:\n%s", stdout.String())
	}
	// A second run replaces the section instead of appending another.
	if err := run(ctx, args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("second run: %v", err)
	}
	doc, _ = os.ReadFile(out)
	if n := strings.Count(string(doc), overheadStart); n != 1 {
		t.Errorf("%d overhead sections after two runs, want 1", n)
	}
}

func TestReplaceSection(t *testing.T) {
	sec := func(body string) string { return overheadStart + "\n" + body + "\n" + overheadEnd + "\n" }
	tests := []struct {
		name, doc, want string
	}{
		{"append to empty header", fileHeader, fileHeader + sec("new")},
		{"append after other text", "# x\nintro", "# x\nintro\n\n" + sec("new")},
		{"replace in the middle", "# x\n\n" + sec("old") + "\n## after\n", "# x\n\n" + sec("new") + "\n## after\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replaceSection(tt.doc, sec("new")); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// fixedResult builds a Result with every latency equal to d.
func fixedResult(rps float64, d time.Duration) loadgen.Result {
	h := loadgen.NewHistogram()
	for range 100 {
		h.Record(d)
	}
	return loadgen.Result{Requests: uint64(rps), Elapsed: time.Second, Latency: h, TTFB: loadgen.NewHistogram()}
}

// degradedResult is res with degraded of its requests answered with
// X-Memory-Degraded, history of them with the history left out.
func degradedResult(res loadgen.Result, degraded, history uint64) loadgen.Result {
	res.Degraded, res.DegradedHistory = degraded, history
	return res
}

func TestGoals(t *testing.T) {
	tests := []struct {
		name       string
		cells      []cell
		pass, fail int
	}{
		{"all met", []cell{
			{target: "direct", conns: 1, res: fixedResult(10000, 100*time.Microsecond)},
			{target: "httputil", conns: 64, res: fixedResult(2000, 30*time.Millisecond)},
			{target: "memgate", conns: 64, res: fixedResult(1900, 33*time.Millisecond)},
		}, 2, 0},
		{"throughput and latency missed", []cell{
			{target: "httputil", conns: 64, res: fixedResult(2000, 30*time.Millisecond)},
			{target: "memgate", conns: 64, res: fixedResult(1700, 40*time.Millisecond)},
		}, 0, 2},
		{"1 conn is not a goal", []cell{
			{target: "direct", conns: 1, res: fixedResult(10000, 100*time.Microsecond)},
			{target: "memgate", conns: 1, res: fixedResult(3000, 400*time.Microsecond)},
		}, 0, 0},
		{"nothing to check", []cell{{target: "direct", conns: 1, res: fixedResult(1, time.Millisecond)}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := report{cells: tt.cells}.goals()
			if p, f := strings.Count(g, "✅"), strings.Count(g, "❌"); p != tt.pass || f != tt.fail {
				t.Errorf("pass/fail = %d/%d, want %d/%d:\n%s", p, f, tt.pass, tt.fail, g)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	runs := []cell{
		{conns: 1, res: fixedResult(300, time.Millisecond)},
		{conns: 2, res: fixedResult(100, time.Millisecond)},
		{conns: 3, res: fixedResult(200, time.Millisecond)},
	}
	if got := median(runs); got.conns != 3 {
		t.Errorf("median picked the run with %.0f req/s, want 200", got.res.RPS())
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
	}{
		{[]string{"bench"}, true},
		{[]string{"bench", "-conns", "1,256", "-rate", "500", "-targets", "memgate-stream"}, true},
		{[]string{"bench", "-conns", "0"}, false},
		{[]string{"bench", "-targets", "nginx"}, false},
		{[]string{"bench", "-duration", "0s"}, false},
		{[]string{"bench", "-repeat", "0"}, false},
		{[]string{"bench", "-repeat", "3"}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseFlags(tt.args, func(string) string { return "" }, &strings.Builder{})
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
