package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/memgate/memgate/bench/fakeupstream"
	gwconfig "github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/proxy/upstream"
	gwserver "github.com/memgate/memgate/internal/server"
)

// Environment of a server child process.
const (
	roleEnv     = "MEMGATE_BENCH_ROLE"     // "upstream" or "httputil"
	upstreamEnv = "MEMGATE_BENCH_UPSTREAM" // httputil: the upstream base URL
	latencyEnv  = "MEMGATE_BENCH_LATENCY"  // upstream: fixed latency
	chunksEnv   = "MEMGATE_BENCH_CHUNKS"   // upstream: content deltas per stream
)

// listeningPrefix starts the line a child prints once it accepts connections.
const listeningPrefix = "listening on "

// serveRole runs a server child: the fake upstream, or a plain
// httputil.ReverseProxy in front of it. It listens on a free loopback port,
// prints that address to stdout, and serves until ctx ends.
func serveRole(ctx context.Context, role string, getenv func(string) string, stdout io.Writer) error {
	var h http.Handler
	switch role {
	case "upstream":
		opts := fakeupstream.Options{}
		if v := getenv(latencyEnv); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %w", latencyEnv, err)
			}
			opts.Latency = d
		}
		if v := getenv(chunksEnv); v != "" {
			if _, err := fmt.Sscan(v, &opts.Chunks); err != nil {
				return fmt.Errorf("%s: %w", chunksEnv, err)
			}
		}
		h = fakeupstream.Handler(opts)
	case "httputil":
		u, err := url.Parse(getenv(upstreamEnv))
		if err != nil || u.Host == "" {
			return fmt.Errorf("%s: bad upstream URL %q", upstreamEnv, getenv(upstreamEnv))
		}
		// The same transport settings as the gateway's (its default
		// configuration), so the comparison measures memgate's own work.
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.Transport = upstream.NewTransport(transportOptions(gwconfig.Default().Upstream))
		h = rp
	default:
		return fmt.Errorf("unknown %s %q", roleEnv, role)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: gwserver.ReadHeaderTimeout, IdleTimeout: gwserver.IdleTimeout, MaxHeaderBytes: gwserver.MaxHeaderBytes}
	fmt.Fprintf(stdout, "%s%s\n", listeningPrefix, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// transportOptions are the gateway's transport settings for up, as its
// wiring passes them.
func transportOptions(up gwconfig.Upstream) upstream.Options {
	return upstream.Options{ConnectTimeout: up.ConnectTimeout.D(), FirstByteTimeout: up.FirstByteTimeout.D(), MaxIdleConns: up.MaxIdleConns}
}
