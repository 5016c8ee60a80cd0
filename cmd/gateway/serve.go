package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/tokens"
)

// flushTimeout bounds how long shutdown waits for pending captures to reach
// the queue or the store.
const flushTimeout = 10 * time.Second

// serve runs the gateway until ctx ends or SIGINT/SIGTERM arrives, then
// shuts down: the HTTP server first (in-flight streams get ShutdownGrace),
// then pending captures are flushed, the capture worker stopped and the
// store closed. It logs JSON to logw; the "listening" line carries the bound
// address.
//
// A store that cannot be reached at start-up does not stop it: the gateway
// serves as a plain proxy (X-Memory-Degraded: store, /healthz/store 503)
// and keeps retrying the connection in the background, switching memory on
// when it comes. A configuration error still fails the start.
func serve(ctx context.Context, getenv func(string) string, logw io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return err
	}
	counter, err := tokens.New(cfg.ContextWindows)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	routeStdLog(logger)
	sideModelKeys(cfg, logger)
	tr, err := setupTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer shutdownTracing(ctx, tr, logger)

	late := newLateMemory(cfg, logger)
	srv, err := newHTTP(cfg, late.httpDeps(cfg, httpDeps{Resolver: identity.NewWithAdmin(cfg.Keys, cfg.AdminKey), Tracing: tr}), logger)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	srv.srv.HandleStoreHealth(late.Ping)

	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	var workers sync.WaitGroup
	ready := func(m *memoryLayer) {
		for _, c := range m.allCollectors() {
			if err := srv.reg.Register(c); err != nil {
				logger.Warn("register memory metrics", "error", err)
			}
		}
		// The capture worker (when in-process) and the enricher; errors
		// are logged by runWorkers.
		workers.Go(func() { _ = m.runWorkers(workerCtx, cfg.Capture.Worker, logger) })
		late.set(m)
	}
	open := func(ctx context.Context) (*memoryLayer, error) { return openMemory(ctx, cfg, counter, logger) }
	switch m, err := open(ctx); {
	case err == nil:
		ready(m)
	case errors.Is(err, errStoreDown):
		logger.Warn("memory store unreachable: serving as a plain proxy (X-Memory-Degraded: store) and retrying in the background", "error", err)
		workers.Go(func() {
			err := connect(workerCtx, open, func(m *memoryLayer) {
				ready(m)
				logger.Info("memory store connected: memory is on")
			}, logger)
			if err != nil && !errors.Is(err, context.Canceled) {
				logger.Error("memory stays off", "error", err)
			}
		})
	default:
		return err
	}
	workers.Go(func() { late.watch(workerCtx) })
	defer func() {
		if m := late.cur.Load(); m != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
			defer cancel()
			if err := m.capturer.Close(fctx); err != nil {
				logger.Error("flush captures", "error", err)
			}
		}
		stopWorker()
		workers.Wait()
		if m := late.cur.Load(); m != nil {
			if err := m.close(); err != nil {
				logger.Error("close store", "error", err)
			}
		}
	}()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	warnOpen(logger, cfg, ln.Addr())
	logger.Info("listening", "addr", ln.Addr().String(), "upstream", cfg.Upstream.BaseURL,
		"store", cfg.Store.Driver, "memory", late.cur.Load() != nil, "gateway_keys", len(cfg.Keys),
		"admin", adminAccess(cfg), "tracing", tr.Exporter, "version", buildVersion())
	if err := srv.Run(ctx, ln); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// warnOpen logs a warning when the gateway listens beyond loopback with no
// gateway key: whoever reaches it can then read and plant any user's memory
// (X-Memory-User) and spend the upstream key.
func warnOpen(logger *slog.Logger, cfg config.Config, addr net.Addr) {
	if len(cfg.Keys) > 0 {
		return
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return
	}
	logger.Warn("memory is served to non-loopback clients without gateway keys: anyone who can reach this address can read and plant any user's memory and use the upstream key; configure keys (or GATEWAY_KEY), or listen on 127.0.0.1",
		"addr", addr.String())
}

// adminAccess says who the management API answers, for the start-up log.
func adminAccess(cfg config.Config) string {
	switch {
	case cfg.AdminKey != "" && len(cfg.Keys) > 0:
		return "admin key or gateway keys"
	case cfg.AdminKey != "":
		return "admin key"
	case len(cfg.Keys) > 0:
		return "gateway keys"
	}
	return "loopback clients only"
}

// worker runs only the capture worker, for deployments that persist
// captures outside the serving processes, until ctx ends or a signal arrives.
func worker(ctx context.Context, getenv func(string) string, logw io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, logger, mem, err := start(ctx, getenv, logw)
	if err != nil {
		return err
	}
	defer mem.close()
	tr, err := setupTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer shutdownTracing(ctx, tr, logger)
	if mem.worker == nil {
		return errors.New("worker: the configured store has no capture queue (postgres needs store.redis_url)")
	}
	logger.Info("capture worker running", "store", cfg.Store.Driver, "version", buildVersion())
	if err := mem.runWorkers(ctx, true, logger); err != nil {
		return fmt.Errorf("capture worker: %w", err)
	}
	return nil
}

// start loads the configuration, builds the logger and the token counter,
// and opens the memory layer: what serve and worker share.
func start(ctx context.Context, getenv func(string) string, logw io.Writer) (config.Config, *slog.Logger, *memoryLayer, error) {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return cfg, nil, nil, err
	}
	counter, err := tokens.New(cfg.ContextWindows)
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("tokens: %w", err)
	}
	mem, err := openMemory(ctx, cfg, counter, logger)
	if err != nil {
		return cfg, nil, nil, err
	}
	return cfg, logger, mem, nil
}

// setup loads the configuration and builds the JSON logger it asks for.
func setup(getenv func(string) string, logw io.Writer) (config.Config, *slog.Logger, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return cfg, nil, fmt.Errorf("config: %w", err)
	}
	return cfg, newLogger(logw, cfg.LogLevel), nil
}

// newLogger returns a JSON logger at level (debug, info, warn or error).
func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// routeStdLog sends what libraries write to the standard log package into
// logger at debug level: net/http's transport logs there, e.g. an upstream's
// unsolicited response, quoting its bytes (which may hold message text).
func routeStdLog(logger *slog.Logger) {
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelDebug).Writer())
}
