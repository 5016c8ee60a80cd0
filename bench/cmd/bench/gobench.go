package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// defaultGoBench are the Go micro-benchmarks `make bench` runs: the
// built-in encoder (a 20-word query, indexing throughput, the tokenizer;
// CPU time per op beside wall time), token counting, the proxy's
// per-request allocations, and (issue #4) the prompt tokens memgate sends
// against the full history, with the cost of assembly.
const defaultGoBench = "./internal/encoder/,./internal/tokens/,./internal/proxy/,./cmd/gateway/=^Benchmark(TokensCurve|Prepare)$"

// goBenchPkg is one package of the Go micro-benchmarks and the -bench
// pattern it runs with.
type goBenchPkg struct {
	dir, pattern string
}

// parseGoBench reads "dir" or "dir=pattern" (pattern default ".").
func parseGoBench(s string) goBenchPkg {
	dir, pattern, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || pattern == "" {
		pattern = "."
	}
	return goBenchPkg{dir: dir, pattern: pattern}
}

// args is the go test command line for p.
func (p goBenchPkg) args() []string {
	return []string{"test", "-run", "^$", "-bench", p.pattern, "-benchmem", p.dir}
}

// runGoBench runs the Go micro-benchmarks of the packages that exist under
// root and returns their output (or the failure, so the report shows it).
func runGoBench(ctx context.Context, root string, pkgs []goBenchPkg) string {
	var keep []string
	for _, p := range pkgs {
		if fi, err := os.Stat(filepath.Join(root, p.dir)); err != nil || !fi.IsDir() {
			continue
		}
		cmd := exec.CommandContext(ctx, "go", p.args()...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") ||
				strings.HasPrefix(line, "cpu:") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "---") {
				keep = append(keep, line)
			}
		}
		if err != nil {
			keep = append(keep, fmt.Sprintf("go %s: %v", strings.Join(p.args(), " "), err))
		}
	}
	return strings.Join(keep, "\n")
}

// curvePoint is one turn of the token curve: prompt tokens memgate sent
// against what the full history would have cost.
type curvePoint struct {
	turn       int
	sent, full float64
}

// curveMetric matches the "N sent@T" and "N full@T" metrics of
// BenchmarkTokensCurve.
var curveMetric = regexp.MustCompile(`([0-9.e+]+) (sent|full)@([0-9]+)`)

// tokenCurve extracts BenchmarkTokensCurve's points from Go benchmark output.
func tokenCurve(out string) []curvePoint {
	var pts []curvePoint
	at := map[int]int{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "BenchmarkTokensCurve") {
			continue
		}
		for _, m := range curveMetric.FindAllStringSubmatch(line, -1) {
			v, err1 := strconv.ParseFloat(m[1], 64)
			turn, err2 := strconv.Atoi(m[3])
			if err1 != nil || err2 != nil {
				continue
			}
			i, ok := at[turn]
			if !ok {
				i = len(pts)
				at[turn] = i
				pts = append(pts, curvePoint{turn: turn})
			}
			if m[2] == "sent" {
				pts[i].sent = v
			} else {
				pts[i].full = v
			}
		}
	}
	return pts
}

// goBenchSection renders the Go micro-benchmark output, markers included.
func (r report) goBenchSection() string {
	if r.goBench == "" {
		return ""
	}
	var cmds []string
	for _, p := range r.cfg.goBenchPkg {
		cmds = append(cmds, "`go "+strings.Join(p.args(), " ")+"`")
	}
	var b strings.Builder
	b.WriteString(goBenchStart + "\n## Go micro-benchmarks\n\n" + strings.Join(cmds, ", ") +
		" — token counting: MB/s of message text and msgs/s; proxy: allocations per request; " +
		"Prepare: assembling the prompt of a warm 300-turn SQLite conversation (memory on) against pass-through (off).\n\n")
	if pts := tokenCurve(r.goBench); len(pts) > 0 {
		b.WriteString("### Prompt tokens sent against the full history (issue #4)\n\n" +
			"`BenchmarkTokensCurve`: one synthetic 1000-turn conversation through the assembler and the compactor " +
			"(default configuration: 8000-token budget, extractive summaries); tokens of the prompt memgate sends at turn N " +
			"against what sending the whole history verbatim would cost.\n\n" +
			"| turn | full history (tokens) | memgate sent (tokens) | sent ÷ full |\n|--:|--:|--:|--:|\n")
		for _, p := range pts {
			ratio := "—"
			if p.full > 0 {
				ratio = fmt.Sprintf("%.2f×", p.sent/p.full)
			}
			fmt.Fprintf(&b, "| %d | %.0f | %.0f | %s |\n", p.turn, p.full, p.sent, ratio)
		}
		b.WriteString("\n")
	}
	b.WriteString("```\n" + strings.TrimSpace(r.goBench) + "\n```\n" + goBenchEnd + "\n")
	return b.String()
}
