package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/proxy"
	"github.com/memgate/memgate/internal/redact"
	"github.com/memgate/memgate/internal/savings"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/tokens"
	"github.com/memgate/memgate/internal/tracing"
)

// store is what the gateway needs of a memory store adapter.
type store interface {
	admin.Store
	prompt.HistoryReader
	record.Saver
	Ping(ctx context.Context) error
}

// memoryLayer is the wired memory: the store, the capture queue and its
// consumers, and the request-side assembler.
type memoryLayer struct {
	store    store
	queue    record.Queue // nil: captures are saved directly
	capturer *record.Capturer
	worker   *record.Worker // nil without a queue
	enricher *record.Enricher
	// enrichInProcess: the enrichment queue lives in this process's memory.
	enrichInProcess bool
	// hooks are the after-save hooks (compaction, extraction, indexing).
	hooks    []record.Hook
	preparer *prompt.Assembler
	recall   *recallLayer // nil when recall is off
	// collectors are the memory layer's own Prometheus collectors (compaction).
	collectors []prometheus.Collector
	closers    []func() error
}

// openStore opens the configured store and its queue, applying migrations.
// The returned closers release them, last opened first.
func openStore(ctx context.Context, cfg config.Config, logger *slog.Logger) (store, record.Queue, []func() error, error) {
	switch cfg.Store.Driver {
	case "sqlite":
		st, err := sqlite.Open(ctx, cfg.Store.SQLitePath, logger)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open sqlite store: %w", err)
		}
		lim, turns := cacheLimits(cfg.Memory.Cache)
		st.SetCacheLimits(lim, turns, cfg.Memory.Cache.RecentMB<<20)
		return st, st.Outbox(), []func() error{st.Close}, nil
	case "postgres":
		pg, err := postgres.Open(ctx, cfg.Store.PostgresURL, logger)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open postgres store: %w", err)
		}
		pg.SetCacheLimits(cacheLimits(cfg.Memory.Cache))
		closers := []func() error{pg.Close}
		if cfg.Store.RedisURL == "" {
			return pg, nil, closers, nil
		}
		rdb, err := redis.NewClient(cfg.Store.RedisURL)
		if err != nil {
			pg.Close()
			return nil, nil, nil, err
		}
		closers = append(closers, rdb.Close)
		// The recent window of each conversation is cached in Redis; every
		// read and save falls back to PostgreSQL when Redis is away.
		cached := redis.Cached{Store: pg, Cache: redis.NewCache(rdb, pg, logger, redis.CacheConfig{
			Prefix: cfg.Store.RedisPrefix,
			Window: max(50, cfg.Memory.RecentMessages),
		})}
		q, err := redis.NewQueue(ctx, rdb, redis.QueueConfig{Prefix: cfg.Store.RedisPrefix})
		if err != nil {
			// Redis down at start-up: serve anyway, saving captures directly.
			logger.Warn("redis queue unavailable at start-up; capturing directly to postgres", "error", err)
			return cached, nil, closers, nil
		}
		return cached, q, closers, nil
	}
	return nil, nil, nil, fmt.Errorf("store.driver %q: %w", cfg.Store.Driver, memory.ErrInvalid)
}

// cacheLimits are the bounds of a store's in-memory recall caches that c
// configures, in bytes: the searches' and the turns around their hits.
func cacheLimits(c config.Cache) (itemindex.Limits, int) {
	return itemindex.Limits{Vectors: c.VectorsMB << 20, Texts: c.TextsMB << 20, Items: c.ItemsMB << 20}, c.TurnsMB << 20
}

// openMemory wires the memory layer for serve (and, without the HTTP side,
// for worker): the store and its queue; the after-save hooks (compaction,
// fact extraction, recall indexing) run by the capture worker and by direct
// saves alike; and the budgeted assembler with recall.
func openMemory(ctx context.Context, cfg config.Config, counter *tokens.Counter, logger *slog.Logger) (*memoryLayer, error) {
	st, q, closers, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStoreDown, err)
	}
	m := &memoryLayer{store: st, queue: q, closers: closers}
	fail := func(err error) (*memoryLayer, error) {
		m.close()
		return nil, err
	}
	var red record.Redactor
	if cfg.Capture.Redact {
		r, err := redact.New(cfg.Capture.RedactPatterns)
		if err != nil {
			return fail(fmt.Errorf("capture.redact_patterns: %w", err))
		}
		red = r
	}
	var hooks []record.Hook
	if cfg.Compaction.Enabled {
		cs, ok := st.(compactionStore)
		if !ok {
			return fail(fmt.Errorf("compaction: the %s store does not support summaries (%T): %w", cfg.Store.Driver, st, memory.ErrInvalid))
		}
		comp := newCompactor(cfg, cs, counter, logger)
		hooks = append(hooks, comp)
		m.collectors = append(m.collectors, comp.Collectors()...)
	}
	rl, err := openRecall(cfg, st, logger)
	if err != nil {
		return fail(err)
	}
	var rec prompt.Recaller
	if rl != nil {
		m.closers = append(m.closers, rl.close)
		hooks = append(hooks, rl.hooks...)
		rec = rl.recaller
		m.recall = rl
	}
	as, ok := st.(assemblerStore)
	if !ok {
		return fail(fmt.Errorf("inject: the %s store cannot serve assembly (%T): %w", cfg.Store.Driver, st, memory.ErrInvalid))
	}
	if m.preparer, err = newAssembler(cfg, as, rec, counter, logger); err != nil {
		return fail(err)
	}
	m.hooks = hooks
	if err := m.wireCapture(ctx, cfg, q, red, logger); err != nil {
		return fail(err)
	}
	return m, nil
}

// httpDeps are the collaborators of the HTTP side.
type httpDeps struct {
	Resolver   *identity.Resolver
	Preparer   proxy.Preparer
	Capturer   proxy.Capturer
	Admin      admin.Store
	Recall     recallService // nil when recall is off
	Ready      func(ctx context.Context) error
	Collectors []prometheus.Collector
	// Importer and Erasures serve POST /v1/memory/import (nil Importer: 503).
	Importer admin.Capture
	Erasures admin.Erasures
	// Tracing traces requests (nil: off).
	Tracing *tracing.Tracing
}

// deps returns the HTTP side's collaborators.
func (m *memoryLayer) deps(cfg config.Config) httpDeps {
	d := httpDeps{
		Resolver: identity.NewWithAdmin(cfg.Keys, cfg.AdminKey),
		Preparer: awaitingPreparer{inner: m.preparer, c: m.capturer},
		Capturer: m.capturer,
		Admin:    m.store,
		Importer: m.capturer,
		Ready:    m.store.Ping,
	}
	if e, ok := m.store.(admin.Erasures); ok {
		d.Erasures = e
	}
	d.Collectors = m.allCollectors()
	if m.recall != nil {
		// Only a non-nil manager goes into the interface (a typed nil would not
		// compare equal to nil).
		d.Recall = m.recall.manager
	}
	return d
}

// gatewayHTTP is the wired HTTP side: the server, the proxy forwarding /v1
// and the management API.
type gatewayHTTP struct {
	srv     *server.Server
	proxy   *proxy.Proxy
	savings *savings.Recorder
	// reg is the registry /metrics serves.
	reg *prometheus.Registry
}

// newHTTP wires the HTTP side for cfg: one Prometheus registry (Go and
// process collectors, d's, the server's and the proxy's) served on /metrics.
func newHTTP(cfg config.Config, d httpDeps, logger *slog.Logger) (*gatewayHTTP, error) {
	reg := prometheus.NewRegistry()
	cs := append([]prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, d.Collectors...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	srv, err := server.New(reg, d.Ready, cfg.ShutdownGrace.D(), logger)
	if err != nil {
		return nil, err
	}
	tr := d.Tracing
	if tr == nil {
		tr = tracing.Off()
	}
	tr.Install(srv.Echo())
	rec := newSavings(d.Admin, logger)
	edge := newEdge(cfg)
	p, err := proxy.New(proxy.Options{
		Upstream:      cfg.Upstream,
		MaxBodyBytes:  cfg.MaxBodyBytes,
		LoadTimeout:   prepareTimeout(cfg),
		Passthrough:   cfg.Security.Passthrough,
		WrapTransport: tr.Transport,
		// Anthropic prompts get cache_control after their stable part.
		CacheBreakpoints: cfg.Memory.CacheBreakpoints,
	}, proxy.Deps{Resolver: d.Resolver, Preparer: tr.Preparer(recordSavings(rec, d.Preparer)), Capturer: tr.Capturer(d.Capturer),
		Browser: edge.chat, Limiter: edge.limiter, Cache: cacheCounter(rec)}, logger, reg)
	if err != nil {
		return nil, err
	}
	edge.register(srv)
	p.Register(srv)
	admin.New(d.Resolver, d.Admin, d.Recall, d.Preparer, cfg.MaxBodyBytes, logger).Register(srv)
	admin.NewImport(d.Resolver, d.Importer, d.Erasures, admin.ImportOptions{
		MaxMessages: cfg.Capture.ImportMaxMessages, MaxBodyBytes: cfg.MaxBodyBytes,
	}, logger).Register(srv)
	registerMCP(cfg, d, edge, srv, logger)
	if err := registerInspector(cfg, d, rec, srv, reg, logger); err != nil {
		return nil, err
	}
	return &gatewayHTTP{srv: srv, proxy: p, savings: rec, reg: reg}, nil
}

// Handler returns the gateway's HTTP handler, for tests.
func (g *gatewayHTTP) Handler() http.Handler { return g.srv.Handler() }

// Run serves on ln until ctx ends (see server.Server.Run), then waits for
// the captures of finished streams to reach the Capturer.
func (g *gatewayHTTP) Run(ctx context.Context, ln net.Listener) error {
	stopSavings := runSavings(ctx, g.savings)
	defer stopSavings()
	err := g.srv.Run(ctx, ln)
	g.proxy.Wait()
	g.proxy.CloseIdleConnections()
	return err
}

// shutdown flushes pending captures (within ctx) and closes the store.
func (m *memoryLayer) shutdown(ctx context.Context) error {
	err := m.capturer.Close(ctx)
	return errors.Join(err, m.close())
}

func (m *memoryLayer) close() error {
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	return errors.Join(errs...)
}
