// Command search measures recall search on PostgreSQL + pgvector (issue #5):
// for each size it generates memory items spread over users with the local
// embedder (384 dimensions), bulk-loads them into a throwaway database,
// builds the HNSW index, and times the SQL of SearchVector (exact, through
// the HNSW index, and as the planner chooses) and SearchText, per user: the
// statements a user too large for the gateway's in-process index is
// searched with (pgstore.Store.SQL); smaller users are ranked in memory.
//
//	go run ./bench/search -sizes 10000,100000,1000000 -out search.md
//
// It prints a markdown report and writes it to -out. The whole run is bounded
// by -budget: a size that does not fit is reported as not measured, and an
// HNSW build that would overrun is cancelled and reported as such.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "search bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	db      string
	sizes   []int
	users   int
	queries int
	// hnswQueries bounds the queries forced through the HNSW index: with a
	// selective user filter each one walks much of the graph.
	hnswQueries int
	limit       int
	budget      time.Duration
	seed        uint64
	out         string
	// buildMem is maintenance_work_mem for the HNSW build: the whole graph
	// must fit in it (about 2.3 kB per 384-dimension item with m = 16).
	buildMem string
	title    string // the report's heading
}

// parseFlags reads args.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := getenv("MEMGATE_TEST_POSTGRES_URL")
	if def == "" {
		def = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	var o options
	var sizes string
	fs.StringVar(&o.db, "db", def, "PostgreSQL server URL; a throwaway database is created on it per size")
	fs.StringVar(&sizes, "sizes", "10000,100000,1000000", "comma-separated item counts")
	fs.IntVar(&o.users, "users", 1000, "users the items are spread over")
	fs.IntVar(&o.queries, "queries", 300, "measured queries per mode and size")
	fs.IntVar(&o.hnswQueries, "hnsw-queries", 60, "measured queries forced through the HNSW index (each walks much of the graph)")
	fs.IntVar(&o.limit, "limit", 10, "results per search (top_k)")
	fs.DurationVar(&o.budget, "budget", 9*time.Minute, "time limit for the whole run")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the generated corpus and queries")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	fs.StringVar(&o.title, "title", "Recall search on PostgreSQL + pgvector", "heading of the markdown report")
	fs.StringVar(&o.buildMem, "build-mem", "4GB", "maintenance_work_mem of the HNSW build (the graph must fit: about 2.3 kB per item)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return o, fmt.Errorf("bad size %q", s)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.users <= 0 || o.queries <= 0 || o.limit <= 0 {
		return o, fmt.Errorf("-users, -queries and -limit must be positive")
	}
	return o, nil
}

// run is the whole command.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	deadline := time.Now().Add(o.budget)
	env, err := describeEnv(ctx, o.db)
	if err != nil {
		return err
	}
	loadStart := loadAverage()
	var results []result
	for _, n := range o.sizes {
		// Loading gets what is left but two minutes for the searches.
		if time.Until(deadline) < 3*time.Minute {
			results = append(results, result{items: n, users: o.users, note: "not measured: the time budget ran out"})
			continue
		}
		logger.Info("measuring", "items", n)
		started := time.Now()
		r, err := measure(ctx, o, n, deadline, logger)
		if err != nil {
			return fmt.Errorf("%d items: %w", n, err)
		}
		r.took = time.Since(started)
		logger.Info("measured", "items", n, "took", r.took)
		results = append(results, r)
	}
	report := render(o, env, loadStart, results)
	fmt.Fprint(stdout, report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	return nil
}
