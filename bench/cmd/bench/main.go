// Command bench is memgate's overhead benchmark (`make bench`). It starts a
// fake upstream, a bare httputil.ReverseProxy and two memgate gateways (the
// embedded SQLite store; PostgreSQL + Redis on a throwaway database and key
// prefix) as separate processes, and drives each with the project's own load
// generator at several concurrencies, streaming and not, memory off and on.
// For memory-on cells it reads the gateway's capture metrics until every
// captured turn is stored (capture throughput and lag); then it sends a long
// memory-on run while sampling the gateway's RSS, runs the Go
// micro-benchmarks, and writes the results into BENCHMARKS.md before
// printing them.
//
//	go run ./bench/cmd/bench -out BENCHMARKS.md
//	go run ./bench/cmd/bench fold -out BENCHMARKS.md -section search search.md
//	go run ./bench/cmd/bench embed-cell -embed-latency 200ms
//	go run ./bench/cmd/bench hostile -runs 3
//	go run ./bench/cmd/bench encoder-cell
//
// The second form folds another benchmark's markdown into its own marked
// section of the file (see fold); the third runs only the remote-embedding
// cell (see embedCell); the fourth the hostile-input cell (see hostile); the
// fifth the offline embedders' cell (see encoderCell).
//
// See -help for the knobs (concurrencies, duration, open-loop rate, upstream
// latency, targets).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is the whole program. When the process was started as one of the
// benchmark's server children (roleEnv set), it serves that role until ctx
// ends; otherwise it runs the benchmark.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if role := getenv(roleEnv); role != "" {
		return serveRole(ctx, role, getenv, stdout)
	}
	if len(args) > 1 && args[1] == "fold" {
		return fold(args[2:], stderr)
	}
	if len(args) > 1 && args[1] == "embed-cell" {
		return embedCell(ctx, args[2:], stdout, stderr)
	}
	if len(args) > 1 && args[1] == "hostile" {
		return hostile(ctx, args[2:], stdout, stderr)
	}
	if len(args) > 1 && args[1] == "encoder-cell" {
		return encoderCell(ctx, args[2:], stdout, stderr)
	}
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	return benchmark(ctx, cfg, stdout, stderr)
}
