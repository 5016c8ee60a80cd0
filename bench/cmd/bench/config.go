package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// config is the benchmark's command line.
type config struct {
	out        string
	conns      []int
	duration   time.Duration
	warmup     time.Duration
	rate       float64
	repeat     int
	latency    time.Duration
	chunks     int
	targets    []string
	gateway    string
	goBench    bool
	goBenchPkg []string
	command    string
}

// defaultTargets are measured unless -targets says otherwise: the overhead
// suite of issue #2.
var defaultTargets = []string{"direct", "httputil", "memgate", "direct-stream", "httputil-stream", "memgate-stream"}

// allTargets lists every target in report order. The memgate-memory targets
// run with X-Memory-Mode: on against the gateway's embedded SQLite store, one
// conversation per connection that the warm-up has already filled.
var allTargets = append(defaultTargets[:len(defaultTargets):len(defaultTargets)], "memgate-memory", "memgate-memory-stream")

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var conns, targets, pkgs string
	fs.StringVar(&c.out, "out", "BENCHMARKS.md", "markdown file to write the results into (empty: print only)")
	fs.StringVar(&conns, "conns", "1,16,64", "comma-separated concurrencies (connections per cell)")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "measured time per cell")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up per cell")
	fs.IntVar(&c.repeat, "repeat", 1, "measure each cell this many times and report the run with the median req/s (damps noise from other work on the machine)")
	fs.Float64Var(&c.rate, "rate", 0, "open loop: requests per second per cell (0: closed loop)")
	fs.DurationVar(&c.latency, "upstream-latency", 0, "fixed latency of the fake upstream before its response headers")
	fs.IntVar(&c.chunks, "chunks", 8, "content deltas per streamed reply")
	fs.StringVar(&targets, "targets", strings.Join(defaultTargets, ","), "comma-separated targets: "+strings.Join(allTargets, ", "))
	fs.StringVar(&c.gateway, "gateway", "", "prebuilt gateway binary (default: go build ./cmd/gateway)")
	fs.BoolVar(&c.goBench, "gobench", true, "also run the Go micro-benchmarks")
	fs.StringVar(&pkgs, "gobench-pkgs", "./internal/tokens/,./internal/proxy/", "packages for the Go micro-benchmarks")
	if err := fs.Parse(args[1:]); err != nil {
		return config{}, err
	}
	for _, s := range strings.Split(conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return config{}, fmt.Errorf("-conns: %q is not a positive number", s)
		}
		c.conns = append(c.conns, n)
	}
	for _, t := range strings.Split(targets, ",") {
		t = strings.TrimSpace(t)
		if !known(t) {
			return config{}, fmt.Errorf("-targets: unknown target %q (have %s)", t, strings.Join(allTargets, ", "))
		}
		c.targets = append(c.targets, t)
	}
	for _, p := range strings.Split(pkgs, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.goBenchPkg = append(c.goBenchPkg, p)
		}
	}
	if c.repeat < 1 {
		return config{}, fmt.Errorf("-repeat must be at least 1")
	}
	if c.duration <= 0 {
		return config{}, fmt.Errorf("-duration must be positive")
	}
	c.command = "go run ./bench/cmd/bench " + strings.Join(args[1:], " ")
	return c, nil
}

func known(t string) bool {
	for _, k := range allTargets {
		if t == k {
			return true
		}
	}
	return false
}

// streaming reports whether target sends "stream": true.
func streaming(target string) bool { return strings.HasSuffix(target, "-stream") }

// floorOf returns the target whose latency is the floor for target.
func floorOf(target string) string {
	if streaming(target) {
		return "direct-stream"
	}
	return "direct"
}

// baselineOf returns the bare-proxy target that target's ratios refer to.
func baselineOf(target string) string {
	if streaming(target) {
		return "httputil-stream"
	}
	return "httputil"
}

// serverOf names the process that serves target.
func serverOf(target string) string {
	if strings.HasPrefix(target, "memgate") {
		return "memgate"
	}
	return strings.TrimSuffix(target, "-stream")
}

// memoryOn reports whether target asks memgate for memory.
func memoryOn(target string) bool { return strings.HasPrefix(target, "memgate-memory") }
