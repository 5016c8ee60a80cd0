// Command otlpsink is an OTLP/HTTP trace receiver that accepts and discards
// what it is sent, counting it: the collector end of the tracing-on
// benchmark cell (BENCHMARKS.md, "Tracing").
//
//	go run ./bench/otlpsink -addr 127.0.0.1:4318
//
// then run the gateway with OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318.
// On SIGINT or SIGTERM it prints the requests and bytes it received.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "listen address")
	flag.Parse()
	var reqs, bytes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		reqs.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
	fmt.Printf("otlpsink: %d export requests, %d bytes\n", reqs.Load(), bytes.Load())
}
