// Command loadgen drives one HTTP endpoint with memgate's load generator and
// prints throughput and latency percentiles.
//
//	go run ./cmd/loadgen -url http://127.0.0.1:8080/v1/chat/completions \
//	    -H 'X-Memory-Mode: off' -c 16 -d 10s -body '{"model":"gpt-4o-mini","messages":[...]}'
//
// -rate switches from closed loop (each connection sends back to back) to
// open loop (fixed arrivals; latency from the scheduled start).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/memgate/memgate/bench/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// headerFlags collects repeated -H "Name: value" flags.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("header %q is not Name: value", s)
	}
	http.Header(h).Add(strings.TrimSpace(k), strings.TrimSpace(v))
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	headers := headerFlags{"Content-Type": {"application/json"}}
	var (
		url      = fs.String("url", "", "target URL (required)")
		method   = fs.String("method", http.MethodPost, "HTTP method")
		body     = fs.String("body", "", "request body")
		bodyFile = fs.String("body-file", "", "read the request body from this file")
		conns    = fs.Int("c", 16, "connections (closed loop) or maximum in flight (open loop)")
		duration = fs.Duration("d", 10*time.Second, "measured duration (0: until -n requests)")
		requests = fs.Int("n", 0, "stop after this many measured requests (0: no limit)")
		warmup   = fs.Duration("warmup", time.Second, "unmeasured warm-up")
		rate     = fs.Float64("rate", 0, "open loop: requests per second (0: closed loop)")
		stream   = fs.Bool("stream", false, "expect SSE ending in data: [DONE]; report time to first byte")
	)
	fs.Var(headers, "H", "request header \"Name: value\" (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *url == "" {
		return errors.New("-url is required")
	}
	b := []byte(*body)
	if *bodyFile != "" {
		var err error
		if b, err = os.ReadFile(*bodyFile); err != nil {
			return fmt.Errorf("read body: %w", err)
		}
	}
	res, err := loadgen.Run(ctx, loadgen.Options{
		Request:  loadgen.Request{Method: *method, URL: *url, Header: http.Header(headers), Body: b},
		Conns:    *conns,
		Duration: *duration,
		Requests: *requests,
		Warmup:   *warmup,
		Rate:     *rate,
		Stream:   *stream,
	})
	if err != nil {
		return err
	}
	l := res.Latency
	fmt.Fprintf(stdout, "requests  %d ok, %d errors in %v (%.0f req/s)\n", res.Requests, res.Errors, res.Elapsed.Round(time.Millisecond), res.RPS())
	fmt.Fprintf(stdout, "latency   p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n",
		l.Quantile(0.5), l.Quantile(0.9), l.Quantile(0.99), l.Quantile(0.999), l.Max())
	if *stream {
		t := res.TTFB
		fmt.Fprintf(stdout, "ttfb      p50 %v  p99 %v  p99.9 %v\n", t.Quantile(0.5), t.Quantile(0.99), t.Quantile(0.999))
	}
	if res.FirstError != "" {
		fmt.Fprintf(stdout, "first error: %s\n", res.FirstError)
	}
	return nil
}
