package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
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
	goBenchPkg []goBenchPkg
	command    string
	// repeatSingle is the repeat count of the one-connection cells, whose
	// microsecond latencies suffer most from other work on the machine.
	repeatSingle int
	// postgresURL is the server on which the memgate-memory-pg targets get a
	// throwaway database; redisURL the Redis they use (with a unique prefix).
	postgresURL, redisURL string
	// rssRequests is the length of the sustained memory-on run that samples
	// the gateway's RSS (0: skip it); rssConns its concurrency; rssBudget
	// the most time it may take.
	rssRequests, rssConns int
	rssBudget             time.Duration
	// prefill is how many turns each memory-on conversation holds before
	// its first measured cell.
	prefill int
	// conversations is how many memory-on conversations (one user each) a
	// gateway's cells spread their turns over, at least the largest conns
	// (0: each connection keeps its own).
	conversations int
	// freshTurns is the length of each conversation of the read-your-writes
	// check (0: skip it).
	freshTurns int
	// historyTurns, when positive, makes the memory-on cells' client a
	// headerless full-history one (historyBody): a new chat every
	// historyTurns turns.
	historyTurns int
	// drainTimeout bounds the wait for the capture backlog after a cell;
	// rssDrain the wait after the sustained run.
	drainTimeout, rssDrain time.Duration
}

// Defaults of the PostgreSQL and Redis the memgate-memory-pg targets use,
// overridable by these environment variables and by flags.
const (
	postgresEnv     = "MEMGATE_BENCH_POSTGRES_URL"
	redisEnv        = "MEMGATE_BENCH_REDIS_URL"
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultRedis    = "redis://127.0.0.1:6379/0"
	// commandEnv names the command that ran the benchmark (scripts/bench.sh
	// sets it), for the report.
	commandEnv = "MEMGATE_BENCH_COMMAND"
)

// allTargets lists every target in report order; all are measured unless
// -targets says otherwise. The memgate-memory targets run with
// X-Memory-Mode: on, one warm conversation per connection: on the gateway's
// embedded SQLite store, and (-pg) on a second gateway using PostgreSQL and
// Redis.
var allTargets = []string{
	"direct", "httputil", "memgate", "memgate-memory", "memgate-memory-pg",
	"direct-stream", "httputil-stream", "memgate-stream", "memgate-memory-stream", "memgate-memory-pg-stream",
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var conns, targets, pkgs string
	fs.StringVar(&c.out, "out", "BENCHMARKS.md", "markdown file to write the results into (empty: print only)")
	fs.StringVar(&conns, "conns", "1,16,64,256", "comma-separated concurrencies (connections per cell)")
	fs.DurationVar(&c.duration, "duration", 2*time.Second, "measured time per cell")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up per cell")
	fs.IntVar(&c.repeat, "repeat", 1, "measure each cell this many times and report the run with the median req/s (damps noise from other work on the machine)")
	fs.IntVar(&c.repeatSingle, "repeat-single", 3, "repeat count of the 1-connection cells (at least -repeat)")
	fs.Float64Var(&c.rate, "rate", 0, "open loop: requests per second per cell (0: closed loop)")
	fs.DurationVar(&c.latency, "upstream-latency", 0, "fixed latency of the fake upstream before its response headers")
	fs.IntVar(&c.chunks, "chunks", 8, "content deltas per streamed reply")
	fs.StringVar(&targets, "targets", strings.Join(allTargets, ","), "comma-separated targets: "+strings.Join(allTargets, ", "))
	fs.StringVar(&c.postgresURL, "postgres-url", envOr(getenv, postgresEnv, defaultPostgres),
		"PostgreSQL server for the -pg targets; a throwaway database is created and dropped on it (env "+postgresEnv+")")
	fs.StringVar(&c.redisURL, "redis-url", envOr(getenv, redisEnv, defaultRedis), "Redis for the -pg targets, used under a unique key prefix (env "+redisEnv+")")
	fs.IntVar(&c.rssRequests, "rss-requests", 100000, "requests of the sustained memory-on run that samples the gateway's RSS (0: skip)")
	fs.IntVar(&c.rssConns, "rss-conns", 64, "connections of the sustained run")
	fs.DurationVar(&c.rssBudget, "rss-budget", 5*time.Minute, "time limit of the sustained run's load; it stops early, and says so, when -rss-requests do not fit")
	fs.IntVar(&c.freshTurns, "fresh-turns", 20, "turns per conversation of the read-your-writes and order check, one conversation per connection of the largest -conns (0: skip it)")
	fs.IntVar(&c.historyTurns, "history-turns", 0, "memory-on cells send what a client that names no conversation and resends its whole history sends "+
		"(no X-Memory-Conversation; the system prompt, every earlier turn with the fake upstream's reply, the new message), a new chat every this many turns "+
		"(0: a named conversation's newest turn)")
	fs.IntVar(&c.prefill, "prefill", 10, "turns stored in each memory-on conversation before it is measured")
	fs.IntVar(&c.conversations, "conversations", 0, "memory-on conversations (one user each) prefilled per gateway, at least the largest -conns; "+
		"when set, a cell of fewer connections moves each connection to its next conversation every turn, so each stays near -prefill turns "+
		"(0: one per connection of the largest cell, each connection keeping its own)")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 90*time.Second, "longest wait for the capture backlog after a memory-on cell")
	fs.DurationVar(&c.rssDrain, "rss-drain", 15*time.Second, "longest wait for the capture backlog after the sustained run (its drain rate is reported either way)")
	fs.StringVar(&c.gateway, "gateway", "", "prebuilt gateway binary (default: go build ./cmd/gateway)")
	fs.BoolVar(&c.goBench, "gobench", true, "also run the Go micro-benchmarks")
	fs.StringVar(&pkgs, "gobench-pkgs", defaultGoBench, "packages for the Go micro-benchmarks, each optionally =-bench pattern")
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
			c.goBenchPkg = append(c.goBenchPkg, parseGoBench(p))
		}
	}
	if c.repeat < 1 {
		return config{}, fmt.Errorf("-repeat must be at least 1")
	}
	c.repeatSingle = max(c.repeatSingle, c.repeat)
	if c.rssRequests < 0 || c.rssConns < 1 || c.prefill < 0 || c.conversations < 0 || c.rssBudget <= 0 || c.freshTurns < 0 || c.historyTurns < 0 {
		return config{}, fmt.Errorf("-rss-requests and -prefill must not be negative, -rss-conns and -rss-budget must be positive")
	}
	if c.duration <= 0 {
		return config{}, fmt.Errorf("-duration must be positive")
	}
	c.command = "go run ./bench/cmd/bench " + strings.Join(args[1:], " ")
	if via := getenv(commandEnv); via != "" {
		c.command = via + "` → `" + c.command
	}
	return c, nil
}

// envOr returns getenv(name), or def when it is empty.
func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
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

// serverOf names the process that serves target: direct, httputil,
// memgate (SQLite) or memgate-pg (PostgreSQL + Redis).
func serverOf(target string) string {
	switch {
	case strings.HasPrefix(target, "memgate-memory-pg"):
		return "memgate-pg"
	case strings.HasPrefix(target, "memgate"):
		return "memgate"
	}
	return strings.TrimSuffix(target, "-stream")
}

// sustainedRun reports whether the sustained memory-on run happens: it
// needs -rss-requests and the memgate-memory target (SQLite).
func (c config) sustainedRun() bool {
	return c.rssRequests > 0 && slices.Contains(c.targets, "memgate-memory")
}

// repeats returns how many times target's cell at conns is measured. The
// 1-connection cells of the proxies (not the memory-on ones, whose
// milliseconds of real work make scheduling noise small) get repeatSingle.
func (c config) repeats(target string, conns int) int {
	if conns == 1 && !memoryOn(target) {
		return c.repeatSingle
	}
	return c.repeat
}

// memoryOn reports whether target asks memgate for memory.
func memoryOn(target string) bool { return strings.HasPrefix(target, "memgate-memory") }
