// Command eval measures memgate's memory quality without an LLM judge: it
// generates long synthetic conversations with planted facts, replays them
// through the real gateway binary (SQLite store, a stand-in upstream that
// doubles as summariser and fact extractor), asks a probe question per
// planted item at several token budgets, and reports how often the answer's
// evidence reached the upstream prompt, how often a superseded fact was
// presented as current, and the prompt tokens sent — next to last-N
// truncation and full-history baselines computed in the same run.
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
