package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/memgate/memgate/bench/loadgen"
)

// requestBody is a small, typical chat completion request.
const requestBody = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Say hello in one short sentence."}],"temperature":0.2%s}`

// cell is one measured (target, concurrency) pair.
type cell struct {
	target string
	conns  int
	res    loadgen.Result
	// cpuPerReq is the serving process's CPU time per request (the fake
	// upstream's for the direct targets, the proxy's otherwise).
	cpuPerReq time.Duration
	rss       int64
}

// benchmark runs every cell, then the Go micro-benchmarks, and reports.
func benchmark(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "memgate-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	need := map[string]bool{}
	for _, t := range cfg.targets {
		need[serverOf(t)] = true
	}
	servers := map[string]*server{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	up, err := startChild(ctx, dir, "upstream", latencyEnv+"="+cfg.latency.String(), fmt.Sprintf("%s=%d", chunksEnv, cfg.chunks))
	if err != nil {
		return err
	}
	servers["direct"] = up
	if need["httputil"] {
		s, err := startChild(ctx, dir, "httputil", upstreamEnv+"="+up.baseURL[:len(up.baseURL)-len("/v1")])
		if err != nil {
			return err
		}
		servers["httputil"] = s
	}
	if need["memgate"] {
		bin := cfg.gateway
		if bin == "" {
			fmt.Fprintln(stderr, "building ./cmd/gateway ...")
			if bin, err = buildGateway(ctx, root, dir); err != nil {
				return err
			}
		}
		s, err := startGateway(ctx, dir, bin, up.baseURL)
		if err != nil {
			return err
		}
		servers["memgate"] = s
	}

	mach := describeMachine(ctx) // before the load, for the load average
	started := time.Now()
	var cells []cell
	for _, n := range cfg.conns {
		for _, t := range cfg.targets {
			var runs []cell
			for range cfg.repeat {
				c, err := measure(ctx, cfg, servers[serverOf(t)], t, n)
				if err != nil {
					return fmt.Errorf("%s at %d conns: %w", t, n, err)
				}
				runs = append(runs, c)
			}
			c := median(runs)
			fmt.Fprintf(stderr, "%-16s c=%-4d %9.0f req/s  p50 %-9v p99 %-9v errors %d\n", t, n,
				c.res.RPS(), round(c.res.Latency.Quantile(0.5)), round(c.res.Latency.Quantile(0.99)), c.res.Errors)
			if c.res.Errors > 0 {
				fmt.Fprintf(stderr, "  first error: %s\n", c.res.FirstError)
			}
			cells = append(cells, c)
		}
	}
	loadWall := time.Since(started)

	var goBench string
	if cfg.goBench {
		fmt.Fprintln(stderr, "running Go micro-benchmarks ...")
		goBench = runGoBench(ctx, root, cfg.goBenchPkg)
	}
	rep := report{cfg: cfg, machine: mach, cells: cells, loadWall: loadWall, goBench: goBench}
	overhead, micro := rep.overheadSection(), rep.goBenchSection()
	if cfg.out != "" {
		if err := updateFile(cfg.out, overhead, micro); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", cfg.out)
	}
	fmt.Fprint(stdout, overhead)
	if micro != "" {
		fmt.Fprint(stdout, "\n", micro)
	}
	return nil
}

// measure runs one cell against s.
func measure(ctx context.Context, cfg config, s *server, target string, conns int) (cell, error) {
	extra := ""
	if streaming(target) {
		extra = `,"stream":true,"stream_options":{"include_usage":true}`
	}
	h := http.Header{
		"Content-Type":  {"application/json"},
		"Authorization": {"Bearer sk-bench-not-a-real-key"},
	}
	var connHeader func(int) http.Header
	switch {
	case memoryOn(target):
		h.Set("X-Memory-Mode", "on")
		h.Set("X-Memory-User", "bench")
		// One conversation per connection, so turns of a conversation
		// arrive in order, as they do from a chat app.
		connHeader = func(i int) http.Header {
			return http.Header{"X-Memory-Conversation": {fmt.Sprintf("%s-c%d-%d", target, conns, i)}}
		}
	case serverOf(target) == "memgate":
		h.Set("X-Memory-Mode", "off")
		h.Set("X-Memory-User", "bench")
		h.Set("X-Memory-Conversation", "bench")
	}
	// Snapshot the server's CPU time when the measured period begins, after
	// the warm-up (the load generator starts measuring at the same offset).
	before := make(chan procStats, 1)
	time.AfterFunc(cfg.warmup, func() {
		st, _ := s.stats()
		before <- st
	})
	res, err := loadgen.Run(ctx, loadgen.Options{
		Request: loadgen.Request{
			Method: http.MethodPost,
			URL:    s.baseURL + "/chat/completions",
			Header: h,
			Body:   fmt.Appendf(nil, requestBody, extra),
		},
		Conns:      conns,
		Duration:   cfg.duration,
		Warmup:     cfg.warmup,
		Rate:       cfg.rate,
		Stream:     streaming(target),
		ConnHeader: connHeader,
	})
	if err != nil {
		return cell{}, err
	}
	if res.Requests == 0 {
		return cell{}, fmt.Errorf("no successful request (%d errors; first: %s)", res.Errors, res.FirstError)
	}
	after, err := s.stats()
	if err != nil {
		return cell{}, err
	}
	b := <-before
	return cell{
		target:    target,
		conns:     conns,
		res:       res,
		cpuPerReq: (after.cpu - b.cpu) / time.Duration(res.Requests+res.Errors),
		rss:       after.rss,
	}, nil
}

// median returns the run with the median req/s.
func median(runs []cell) cell {
	slices.SortFunc(runs, func(a, b cell) int { return cmp.Compare(a.res.RPS(), b.res.RPS()) })
	return runs[len(runs)/2]
}

// round trims a duration for display.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}
