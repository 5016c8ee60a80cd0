package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/memgate/memgate/bench/pathological"
)

// hostileGoalMs is issue 24's goal: at most 3 CPU-seconds of gateway work
// for each hostile input.
const hostileGoalMs = 3000

// hostileCommand is the Go benchmark the hostile cell runs.
func hostileCommand(runs int) []string {
	return []string{"test", "-run", "^$", "-bench", "^BenchmarkHostileInputs$", "-benchtime", "1x",
		"-count", strconv.Itoa(runs), "-timeout", "60m", "./cmd/gateway/"}
}

// hostile is the hostile-input cell (`bench hostile`): it runs
// BenchmarkHostileInputs (cmd/gateway: each input of bench/pathological as
// one memory-on request through the whole SQLite gateway, capture and
// enrichment included) -runs times and prints a markdown table of the CPU
// each input cost per request, against issue 24's goal.
//
//	go run ./bench/cmd/bench hostile -runs 3
func hostile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 3, "runs of each input (the table gives the median and the largest)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m := describeMachine(ctx)
	cmd := exec.CommandContext(ctx, "go", hostileCommand(*runs)...)
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		os.Stderr.Write(out)
		return fmt.Errorf("hostile: go %s: %w", strings.Join(hostileCommand(*runs), " "), err)
	}
	cpu := parseHostile(string(out))
	if len(cpu) == 0 {
		return fmt.Errorf("hostile: no BenchmarkHostileInputs results in:\n%s", out)
	}
	_, err = io.WriteString(stdout, hostileTable(m, *runs, cpu))
	return err
}

// hostileLine matches one BenchmarkHostileInputs result and its cpu-ms/req.
var hostileLine = regexp.MustCompile(`^BenchmarkHostileInputs/(\S+?)(?:-\d+)?\s.*?\s([0-9.e+]+) cpu-ms/req`)

// parseHostile returns the cpu-ms/req of each input, one value per run.
func parseHostile(out string) map[string][]float64 {
	cpu := map[string][]float64{}
	for _, line := range strings.Split(out, "\n") {
		m := hostileLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		cpu[m[1]] = append(cpu[m[1]], v)
	}
	return cpu
}

// hostileTable renders the cell: one row per input of the corpus, in its
// order.
func hostileTable(m machine, runs int, cpu map[string][]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Hostile inputs (issue 24)\n\n- Date: %s\n- Machine: %s, %d logical CPUs, load average before the run %s\n- Go: %s\n- Code: commit %s\n"+
		"- Command: `go run ./bench/cmd/bench hostile -runs %d` → `go %s`\n\n",
		m.date, m.cpu, m.nproc, m.loadavg, m.goVersion, m.commit, runs, strings.Join(hostileCommand(runs), " "))
	b.WriteString("Each input of `bench/pathological` sent once as a memory-on chat completion (a new user each time) " +
		"through the whole gateway in one process: SQLite store, default configuration, capture, and enrichment " +
		"(compaction, fact extraction and recall indexing against a local fake upstream). *CPU per request* is the " +
		"process's CPU time (getrusage, all threads) from the request until its capture is stored and enriched and " +
		"its goroutines are gone — everything the request caused, abandoned work included. Goal: at most 3 CPU-seconds each " +
		"(before issue 24's fixes: 27–100 s for the long word and the `eyJ-` repeats, more than 5 minutes for 240 KB of spaces).\n\n")
	b.WriteString("| input | request bytes | CPU per request, median (ms) | largest (ms) | goal ≤ 3000 ms |\n|---|--:|--:|--:|:-:|\n")
	for _, in := range pathological.Inputs() {
		vs := cpu[in.Name]
		if len(vs) == 0 {
			fmt.Fprintf(&b, "| %s | %d | — | — | not run |\n", in.Name, len(in.Body))
			continue
		}
		slices.Sort(vs)
		med, top := vs[len(vs)/2], vs[len(vs)-1]
		mark := "✅"
		if top > hostileGoalMs {
			mark = "❌"
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %s |\n", in.Name, len(in.Body), med, top, mark)
	}
	return b.String()
}
