// Command demo shows memgate's memory at work with no API key and no
// services: it starts the real gateway on its embedded default (a temp
// SQLite database) in front of a local STAND-IN upstream (eval/standin — not
// a model), plays a short scripted conversation over three sessions, and
// prints at each turn what memgate sent upstream: the memory block, the
// recalled facts, and the tokens sent versus the full history.
//
//	go run ./cmd/demo
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
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
