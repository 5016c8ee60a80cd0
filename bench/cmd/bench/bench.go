package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/memgate/memgate/bench/loadgen"
	"github.com/memgate/memgate/bench/scratch"
)

// fixedMessage is the user message of the proxies' cells.
const fixedMessage = "Say hello in one short sentence."

// benchUser is the X-Memory-User of the pass-through cells.
const benchUser = "bench"

// cell is one measured (target, concurrency) pair.
type cell struct {
	target string
	conns  int
	res    loadgen.Result
	// cpuPerReq is the serving process's CPU time per request (the fake
	// upstream's for the direct targets, the proxy's otherwise).
	cpuPerReq time.Duration
	rss       int64
	// capture is set for memory-on targets: what capture did from the start
	// of the cell until its backlog was stored.
	capture *captureStat
}

// benchmark starts the servers, prefills the memory-on conversations, runs
// every cell, the sustained run and the Go micro-benchmarks, and reports.
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
	servers, stop, err := startServers(ctx, cfg, root, dir, stderr)
	defer stop()
	if err != nil {
		return err
	}

	mach := describeMachine(ctx) // before the load, for the load average
	started := time.Now()
	warm := map[string]bool{}
	for _, t := range cfg.targets {
		if memoryOn(t) && !warm[serverOf(t)] {
			warm[serverOf(t)] = true
			if err := prefill(ctx, cfg, servers[serverOf(t)], t, memoryConversations(cfg), stderr); err != nil {
				return fmt.Errorf("prefill %s: %w", t, err)
			}
		}
	}
	if err := analyzeAfterPrefill(ctx, servers, stderr); err != nil {
		return err
	}
	var cells []cell
	runs := 0 // cells measured, repeats included
	for _, n := range cfg.conns {
		for _, t := range cfg.targets {
			var same []cell
			for range cfg.repeats(t, n) {
				if err := settleServers(ctx, servers, stderr); err != nil {
					return err
				}
				runs++
				c, err := measure(ctx, cfg, servers[serverOf(t)], t, n, runs*1_000_000)
				if err != nil {
					return fmt.Errorf("%s at %d conns: %w", t, n, err)
				}
				same = append(same, c)
			}
			c := median(same)
			fmt.Fprintf(stderr, "%-24s c=%-4d %9.0f req/s  p50 %-9v p99 %-9v errors %d\n", t, n,
				c.res.RPS(), round(c.res.Latency.Quantile(0.5)), round(c.res.Latency.Quantile(0.99)), c.res.Errors)
			if c.res.Errors > 0 {
				fmt.Fprintf(stderr, "  first error: %s\n", c.res.FirstError)
			}
			cells = append(cells, c)
		}
	}
	loadWall := time.Since(started)
	rep := report{cfg: cfg, machine: mach, cells: cells, loadWall: loadWall}

	for _, name := range []string{"memgate", "memgate-pg"} {
		if s := servers[name]; s != nil && usesMemory(cfg, name) {
			c, err := checkStore(ctx, s, name, cellUsers(cfg, name), cfg.drainTimeout)
			if err != nil {
				return fmt.Errorf("check %s store: %w", name, err)
			}
			rep.stores = append(rep.stores, c)
		}
	}
	for _, name := range []string{"memgate", "memgate-pg"} {
		if s := servers[name]; s != nil && usesMemory(cfg, name) && cfg.freshTurns > 0 {
			conns := slices.Max(cfg.conns)
			fmt.Fprintf(stderr, "read-your-writes check on %s: %d conversations of %d turns ...\n", name, conns, cfg.freshTurns)
			f, err := runFresh(ctx, s, name, conns, cfg.freshTurns)
			if err != nil {
				return fmt.Errorf("read-your-writes check on %s: %w", name, err)
			}
			fmt.Fprintf(stderr, "%-24s read-your-writes %.1f%%  degraded history %.1f%% any %.1f%%  lost %d  duplicated %d  out of order %d  drained after %v\n",
				name, 100*f.rywShare(), 100*f.share(f.degradedHistory), 100*f.share(f.degradedAny), f.lost, f.duplicated, f.outOfOrder, round(f.capture.drain))
			rep.fresh = append(rep.fresh, f)
		}
	}
	if cfg.sustainedRun() {
		fmt.Fprintf(stderr, "sustained run: %d memory-on requests ...\n", cfg.rssRequests)
		if rep.sustained, err = runSustained(ctx, cfg, servers["memgate"], stderr); err != nil {
			return err
		}
	}
	if cfg.goBench {
		fmt.Fprintln(stderr, "running Go micro-benchmarks ...")
		rep.goBench = runGoBench(ctx, root, cfg.goBenchPkg)
	}
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

// cellUsers lists the users of the memory-on cells served by name.
func cellUsers(cfg config, name string) []string {
	var users []string
	for _, t := range cfg.targets {
		if memoryOn(t) && serverOf(t) == name {
			for i := range memoryConversations(cfg) {
				users = append(users, memoryUser(t, i))
			}
			return users
		}
	}
	return users
}

// usesMemory reports whether any selected target sends memory-on requests to the server named name.
func usesMemory(cfg config, name string) bool {
	for _, t := range cfg.targets {
		if memoryOn(t) && serverOf(t) == name {
			return true
		}
	}
	return false
}

// startServers starts the fake upstream and the servers the targets need.
// stop stops them and removes the PostgreSQL database and Redis keys; call
// it even when err is set.
func startServers(ctx context.Context, cfg config, root, dir string, stderr io.Writer) (map[string]*server, func(), error) {
	servers := map[string]*server{}
	var backend *scratch.Backend
	stop := func() {
		for _, s := range servers {
			s.stop()
		}
		if backend != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := backend.Close(cctx); err != nil {
				fmt.Fprintf(stderr, "clean up %s: %v\n", backend.Name, err)
			}
		}
	}
	need := map[string]bool{}
	for _, t := range cfg.targets {
		need[serverOf(t)] = true
	}
	up, err := startChild(ctx, dir, "upstream", latencyEnv+"="+cfg.latency.String(), fmt.Sprintf("%s=%d", chunksEnv, cfg.chunks))
	if err != nil {
		return servers, stop, err
	}
	servers["direct"] = up
	if need["httputil"] {
		s, err := startChild(ctx, dir, "httputil", upstreamEnv+"="+up.rootURL())
		if err != nil {
			return servers, stop, err
		}
		servers["httputil"] = s
	}
	if !need["memgate"] && !need["memgate-pg"] {
		return servers, stop, nil
	}
	bin := cfg.gateway
	if bin == "" {
		fmt.Fprintln(stderr, "building ./cmd/gateway ...")
		if bin, err = buildGateway(ctx, root, dir); err != nil {
			return servers, stop, err
		}
	}
	if need["memgate"] {
		s, err := startGateway(ctx, dir, bin, "memgate", up.baseURL, "GATEWAY_STORE=sqlite", "GATEWAY_SQLITE_PATH="+filepath.Join(dir, "memgate.db"))
		if err != nil {
			return servers, stop, err
		}
		servers["memgate"] = s
	}
	if need["memgate-pg"] {
		if backend, err = newPGBackend(ctx, cfg.postgresURL, cfg.redisURL); err != nil {
			return servers, stop, err
		}
		env, err := gatewayEnv(backend, dir)
		if err != nil {
			return servers, stop, err
		}
		s, err := startGateway(ctx, dir, bin, "memgate-pg", up.baseURL, env...)
		if err != nil {
			return servers, stop, err
		}
		s.dbURL = backend.DBURL
		servers["memgate-pg"] = s
	}
	return servers, stop, nil
}

// chatRequest is the benchmark's chat completion request to s, streamed or
// not, with extra headers.
func chatRequest(s *server, stream bool, extra http.Header) loadgen.Request {
	h := http.Header{
		"Content-Type":  {"application/json"},
		"Authorization": {"Bearer sk-bench-not-a-real-key"},
	}
	for k, v := range extra {
		h[k] = v
	}
	return loadgen.Request{
		Method: http.MethodPost,
		URL:    s.baseURL + "/chat/completions",
		Header: h,
		Body:   chatBody(fixedMessage, stream),
	}
}

// prefill gives each of the conns conversations of a gateway's memory-on
// targets cfg.prefill stored turns, so that its cells measure warm conversations
// whose history fills memgate's recent window, and waits until capture has
// stored them.
func prefill(ctx context.Context, cfg config, s *server, target string, conns int, stderr io.Writer) error {
	if cfg.prefill == 0 {
		return nil
	}
	fmt.Fprintf(stderr, "prefilling %d conversations of %s with %d turns ...\n", conns, target, cfg.prefill)
	res, err := loadgen.Run(ctx, loadgen.Options{
		Request:    chatRequest(s, streaming(target), memoryOnHeader()),
		Conns:      conns,
		PerConn:    cfg.prefill,
		Stream:     streaming(target),
		ConnHeader: memoryIdentity(target),
		Vary:       varyTurns(streaming(target)),
	})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d failed requests (first: %s)", res.Errors, res.FirstError)
	}
	m, err := scrapeMetrics(ctx, s)
	if err != nil {
		return err
	}
	if _, ok, err := waitDrained(ctx, s, m, cfg.drainTimeout); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("capture backlog not stored within %v", cfg.drainTimeout))
	}
	return nil
}

// measure runs one cell against s. For a memory-on target it also waits
// until capture has stored the cell's exchanges, so the next cell starts
// without a backlog, and records how long that took; seqBase numbers its
// turns apart from every earlier run's.
func measure(ctx context.Context, cfg config, s *server, target string, conns, seqBase int) (cell, error) {
	var h http.Header
	var connHeader func(int) http.Header
	var vary func(int, int) ([]byte, http.Header)
	var watch *captureWatch
	switch {
	case memoryOn(target):
		h = memoryOnHeader()
		// The users and conversations the prefill warmed, each
		// connection cycling through its own share of them (memoryTurn),
		// each turn different; the sequence numbers go on from seqBase, so
		// no turn repeats one stored before.
		n := conns
		if cfg.conversations > 0 {
			n = memoryConversations(cfg)
		}
		vary = func(conn, seq int) ([]byte, http.Header) {
			return chatBody(userMessage(conn, seqBase+seq), streaming(target)), memoryTurn(target, n, conns, conn, seq)
		}
		if cfg.historyTurns > 0 {
			vary = func(conn, seq int) ([]byte, http.Header) { return historyTurn(cfg, target, conn, seqBase, seq) }
		}
		var err error
		if watch, err = watchCapture(ctx, s); err != nil {
			return cell{}, err
		}
	case serverOf(target) == "memgate":
		h = http.Header{"X-Memory-Mode": {"off"}, "X-Memory-User": {benchUser}, "X-Memory-Conversation": {"bench"}}
	}
	// Snapshot the server's CPU time when the measured period begins, after
	// the warm-up (the load generator starts measuring at the same offset).
	before := make(chan procStats, 1)
	time.AfterFunc(cfg.warmup, func() {
		st, _ := s.stats()
		before <- st
	})
	res, err := loadgen.Run(ctx, loadgen.Options{
		Request:    chatRequest(s, streaming(target), h),
		Conns:      conns,
		Duration:   cfg.duration,
		Warmup:     cfg.warmup,
		Rate:       cfg.rate,
		Stream:     streaming(target),
		ConnHeader: connHeader,
		Vary:       vary,
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
	c := cell{
		target:    target,
		conns:     conns,
		res:       res,
		cpuPerReq: (after.cpu - b.cpu) / time.Duration(res.Requests+res.Errors),
		rss:       after.rss,
	}
	if watch != nil {
		st, err := watch.finish(ctx, cfg.drainTimeout)
		if err != nil {
			return cell{}, err
		}
		c.capture = &st
	}
	return c, nil
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
