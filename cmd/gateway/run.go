package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/tokens"
	"github.com/memgate/memgate/internal/tracing"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `usage: gateway [command]

commands:
  serve      run the gateway (default)
  worker     run only the capture worker and the enricher (needs a capture queue)
  migrate    apply the store's migrations and exit
  reindex    index what long exchanges left for later, and re-embed memory items
             made by another embedding model or dimension (resumable: interrupt
             and run again)
  mcp        serve the memory to a local MCP client over stdin/stdout
             (flags: -tenant NAME, default "default"; see README "MCP")
  healthcheck  exit 0 when the local gateway answers /healthz
  version    print the version
  hash-key   print sha256:<hex> of a gateway key, read from the argument or stdin,
             for the keys[].hash setting`

// run is the whole program: main only calls it, tests call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 1 {
		cmd = args[1]
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "serve":
		return serve(ctx, getenv, stderr)
	case "worker":
		return worker(ctx, getenv, stderr)
	case "migrate":
		return migrate(ctx, getenv, stdout, stderr)
	case "reindex":
		return reindex(ctx, getenv, stdout, stderr)
	case "mcp":
		return mcpStdio(ctx, args[2:], getenv, stdin, stdout, stderr)
	case "healthcheck":
		cfg, _, err := setup(getenv, io.Discard)
		if err != nil {
			return err
		}
		return server.Healthcheck(ctx, cfg.Listen)
	case "version":
		fmt.Fprintln(stdout, "memgate", buildVersion())
		return nil
	case "hash-key":
		return hashKey(args[2:], stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

// buildVersion is the -ldflags version, else the module version the go
// command recorded in the binary (from version control since Go 1.24).
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); version == "" && ok && info.Main.Version != "(devel)" {
		return cmp.Or(info.Main.Version, "devel")
	}
	return cmp.Or(version, "devel")
}

// hashKey prints the configuration hash of the key given as the argument or
// on the first line of stdin.
func hashKey(args []string, stdin io.Reader, stdout io.Writer) error {
	var key string
	switch len(args) {
	case 0:
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read key: %w", err)
		}
		key = strings.TrimRight(line, "\r\n")
	case 1:
		key = args[0]
	default:
		return errors.New("hash-key takes at most one argument")
	}
	if key == "" {
		return errors.New("hash-key: empty key")
	}
	fmt.Fprintln(stdout, identity.HashKey(key))
	return nil
}

// serve runs the gateway until ctx ends, then shuts down: the HTTP server
// first (in-flight streams get ShutdownGrace), then the memory engine
// (pending captures flushed, workers stopped, store closed). It logs JSON
// to logw; the "listening" line carries the bound address. A store that
// cannot be reached at start-up does not stop it (see engine.Engine.Start);
// a configuration error does.
func serve(ctx context.Context, getenv func(string) string, logw io.Writer) error {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return err
	}
	counter, err := tokens.New(cfg.ContextWindows)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	// net/http's transport logs to the standard logger, quoting bytes that
	// may hold message text: debug level only.
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelDebug).Writer())
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}
	tr, stopTracing, err := tracing.Start(ctx, getenv, buildVersion(), logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	reg := prometheus.NewRegistry()
	reg.MustRegister(counter.Collectors()...)
	eng := engine.New(engine.Options{Workers: cfg.Capture.Worker, Registerer: reg}, logger)
	// One Redis client serves the store's queues and erasure notices and
	// the proxy's shared prints and resenders. Closed last: the erasures the engine
	// serves or notices reach the shared prints until the engine is
	// closed, and a store the engine opens again borrows it again.
	rc, err := openRedis(cfg, logger)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if rc != nil {
		defer rc.Close()
	}
	g, err := newHTTP(cfg, eng, rc, tr, reg, logger)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	if err := eng.Start(ctx, func(ctx context.Context) (*engine.Core, error) {
		// An erasure makes the proxy forget the user's prints too.
		m, err := openMemory(ctx, cfg, rc, counter, g.proxy, logger)
		if err != nil {
			return nil, err
		}
		return m.Core, nil
	}); err != nil {
		return err
	}
	defer eng.Close(ctx)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); len(cfg.Keys) == 0 && !net.ParseIP(host).IsLoopback() {
		logger.Warn("memory is served to non-loopback clients without gateway keys: anyone who can reach this address can read and plant any user's memory and use the upstream key; configure keys (or GATEWAY_KEY), or listen on 127.0.0.1",
			"addr", ln.Addr().String())
	}
	admin := map[[2]bool]string{{true, true}: "admin key or gateway keys", {true, false}: "admin key", {false, true}: "gateway keys", {false, false}: "loopback clients only"}
	logger.Info("listening", "addr", ln.Addr().String(), "upstream", cfg.Upstream.BaseURL, "store", cfg.Store.Driver, "memory", eng.Connected(),
		"gateway_keys", len(cfg.Keys), "admin", admin[[2]bool{cfg.AdminKey != "", len(cfg.Keys) > 0}], "tracing", tr.Exporter, "version", buildVersion())
	if err := g.Run(ctx, ln); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// worker runs only the capture worker and the enricher, for deployments
// that persist captures outside the serving processes, until ctx ends.
func worker(ctx context.Context, getenv func(string) string, logw io.Writer) error {
	cfg, logger, mem, err := start(ctx, getenv, logw)
	if err != nil {
		return err
	}
	defer mem.Close()
	_, stopTracing, err := tracing.Start(ctx, getenv, buildVersion(), logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	if mem.Worker == nil {
		return errors.New("worker: the configured store has no capture queue (postgres needs store.redis_url)")
	}
	logger.Info("capture worker running", "store", cfg.Store.Driver, "version", buildVersion())
	if err := mem.RunWorkers(ctx, true, logger); err != nil {
		return fmt.Errorf("capture worker: %w", err)
	}
	return nil
}

// mcpStdio runs `gateway mcp`: the MCP server over stdin and stdout for a
// local client that starts the command itself. It opens the configured
// store directly, so whoever can run it with the gateway's configuration
// acts as the admin key would, for the -tenant flag's tenant. Logs go to
// logw; stdout carries the protocol only.
func mcpStdio(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, logw io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(logw)
	tenant := fs.String("tenant", memory.DefaultTenant, "the tenant whose memory the tools act on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected argument %q", fs.Arg(0))
	}
	if !memory.ValidID(*tenant) {
		return fmt.Errorf("mcp: -tenant must be %s: %w", memory.IDChars, memory.ErrInvalid)
	}
	cfg, logger, mem, err := start(ctx, getenv, logw)
	if err != nil {
		return err
	}
	eng := engine.New(engine.Options{}, logger)
	eng.Use(mem.Core)
	defer eng.Close(ctx)
	logger.Info("mcp over stdio", "store", cfg.Store.Driver, "version", buildVersion())
	return newMCP(cfg, eng, recallOf(eng, mem.Recall != nil), logger).ServeStdio(ctx, *tenant, stdin, stdout)
}

// start is setup, then openMemory: what worker and mcp share.
func start(ctx context.Context, getenv func(string) string, logw io.Writer) (config.Config, *slog.Logger, *memoryLayer, error) {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return cfg, nil, nil, err
	}
	counter, err := tokens.New(cfg.ContextWindows)
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("tokens: %w", err)
	}
	mem, err := openMemory(ctx, cfg, nil, counter, nil, logger)
	return cfg, logger, mem, err
}

// setup loads the configuration and builds the JSON logger at its level.
func setup(getenv func(string) string, logw io.Writer) (config.Config, *slog.Logger, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return cfg, nil, fmt.Errorf("config: %w", err)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel))); err != nil {
		l = slog.LevelInfo
	}
	return cfg, slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: l})), nil
}

// migrate applies the configured store's migrations (opening a store
// applies them, serialized across replicas) and exits.
func migrate(ctx context.Context, getenv func(string) string, stdout, logw io.Writer) error {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return err
	}
	b, err := openStore(ctx, cfg, nil, logger)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.store.Ping(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(stdout, "migrations applied to the %s store\n", cfg.Store.Driver)
	return nil
}

// reindex indexes what the index backlog holds (engine.DrainIndexBacklog),
// then re-embeds every memory item whose vector was made by another
// model or dimension than the configured embedder's, printing progress at
// most once a second. Interrupted, it stops after the round or batch in
// hand; a rerun continues.
func reindex(ctx context.Context, getenv func(string) string, stdout, logw io.Writer) error {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return err
	}
	b, err := openStore(ctx, cfg, nil, logger)
	if err != nil {
		return err
	}
	defer b.close()
	emb, _, err := newEmbedder(cfg.Recall.Embeddings, cfg.Upstream, b.embeddings, nil, logger)
	if err != nil {
		return err
	}
	start, last := time.Now(), time.Now()
	rounds, err := engine.DrainIndexBacklog(ctx, b.store, emb, cfg.Recall.Embeddings.Provider, logger)
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	fmt.Fprintf(stdout, "indexed what long exchanges left in %d rounds\n", rounds)
	fmt.Fprintf(stdout, "reindexing items not embedded with %s (%d dimensions)\n", emb.Model(), emb.Dims())
	done, err := recall.Reindex(ctx, b.store, emb, 256, func(n int, lastID int64) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "reindexed %d items (up to id %d)\n", n, lastID)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stdout, "interrupted after %d items; run reindex again to resume\n", done)
		}
		return fmt.Errorf("reindex: %w", err)
	}
	fmt.Fprintf(stdout, "reindexed %d items in %s\n", done, time.Since(start).Round(time.Millisecond))
	return nil
}
