// Command eval measures memgate's memory quality without an LLM judge: it
// generates long two-speaker conversations (eval/synth) with questions tied
// to their evidence turns, replays them through the real gateway binary
// (SQLite store, a stand-in upstream scripted with the second speaker's
// lines that doubles as summariser and fact extractor), asks every question
// at several token budgets, and reports the share of evidence turns that
// reached the upstream prompt by question type and by depth — next to
// last-N truncation, BM25 over single turns and full-history baselines
// computed in the same run.
//
//	go run ./eval/cmd/eval -out eval-results.md
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}
