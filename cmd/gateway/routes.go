package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/mcpserver"
	"github.com/memgate/memgate/internal/proxy"
	"github.com/memgate/memgate/internal/savings"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/tracing"
	"github.com/memgate/memgate/internal/ui"
)

// The engine's erasure says how many queued turns it purged (the
// management API's answer counts them).
var _ admin.QueueEraser = (*engine.Engine)(nil)

// The Redis prints and resenders are the ones the proxy's processes
// share; the proxy forgets an erased user's (openMemory).
var (
	_ proxy.PrintStore    = (*redis.Prints)(nil)
	_ proxy.ResenderStore = (*redis.Resenders)(nil)
	_ cache.Forgetter     = (*proxy.Proxy)(nil)
)

// maxLimitedClients bounds the clients the failed-key limiter remembers.
const maxLimitedClients = 10_000

// recallService is what the management API and MCP need of recall.
type recallService interface {
	admin.Recall
	mcpserver.Recall
}

// recallOf is eng as the recallService, nil when recall is off.
func recallOf(eng *engine.Engine, on bool) recallService {
	if !on {
		return nil
	}
	return eng
}

// gatewayHTTP is the wired HTTP side.
type gatewayHTTP struct {
	srv     *server.Server
	proxy   *proxy.Proxy
	savings *savings.Recorder
}

// newHTTP wires the HTTP side over eng: the server (whose metrics, the Go
// and process collectors and eng's, reg holds and /metrics serves), the
// proxy forwarding /v1, the management API, MCP and the web inspector.
// conn is the process's client of the Redis beside PostgreSQL (openRedis;
// nil: none), through which the gateway processes share the prints of
// exchanges (openPrints) and the users seen resending their history
// (redis.Resenders); without it each process keeps its own. reg holds its
// breaker's metrics too.
func newHTTP(cfg config.Config, eng *engine.Engine, conn *redisConn, tr *tracing.Tracing, reg *prometheus.Registry, logger *slog.Logger) (*gatewayHTTP, error) {
	cs := append([]prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, eng.Collectors()...)
	if conn != nil {
		cs = append(cs, conn.breaker.Collectors()...)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	srv, err := server.New(reg, nil, cfg.ShutdownGrace.D(), logger) // chat is served with or without the store
	if err != nil {
		return nil, err
	}
	tr.Install(srv.Echo())
	keys := make([]identity.Key, len(cfg.Keys))
	for i, k := range cfg.Keys {
		keys[i] = identity.Key(k) // the same fields, without the YAML tags
	}
	resolver := identity.NewWithAdmin(keys, cfg.AdminKey)
	rec := savings.New(eng, savings.DefaultBucket, nil, logger)
	sec := cfg.Security
	// The browser guard stands on every surface no key protects; the
	// failed-key limiter everywhere.
	var chatGuard, manageGuard *server.BrowserGuard
	if len(cfg.Keys) == 0 {
		chatGuard = server.NewBrowserGuard(cfg.Listen, sec.AllowedHosts, sec.AllowedOrigins)
		if cfg.AdminKey == "" {
			manageGuard = chatGuard
		}
	}
	limiter := server.NewFailureLimiter(sec.FailedAuthBurst, sec.FailedAuthRefill.D(), maxLimitedClients, nil)
	// /metrics names the models every tenant asks for: with any key
	// configured, only the metrics key and the admin key open it; with
	// none, the browser guard stands in front of it as of chat.
	metricsGuard := chatGuard.Middleware(false, nil)
	if len(cfg.Keys) > 0 || cfg.AdminKey != "" || sec.MetricsKey != "" {
		metricsGuard = server.MetricsKeyGuard(identity.MatchKeys(cfg.AdminKey, sec.MetricsKey), nil)
	}
	up, br := cfg.Upstream, cfg.Upstream.Breaker
	var shared proxy.PrintStore // nil, not a nil *redis.Prints
	if prints := openPrints(cfg, conn); prints != nil {
		shared = prints
	}
	var resenders proxy.ResenderStore // likewise
	if conn != nil {
		resenders = redis.NewResenders(conn.client, cfg.Store.RedisPrefix, conn.breaker)
	}
	p, err := proxy.New(proxy.Options{
		Upstream: proxy.Upstream{BaseURL: up.BaseURL, APIKey: up.APIKey, ConnectTimeout: up.ConnectTimeout.D(), FirstByteTimeout: up.FirstByteTimeout.D(),
			IdleStreamTimeout: up.IdleStreamTimeout.D(), MaxIdleConns: up.MaxIdleConns, Retries: up.Retries, RetryBaseDelay: up.RetryBaseDelay.D(),
			RetryMaxDelay: up.RetryMaxDelay.D(), Anthropic: proxy.Anthropic(up.Anthropic),
			Breaker: proxy.Breaker{ConsecutiveFailures: br.ConsecutiveFailures, OpenTimeout: br.OpenTimeout.D(), HalfOpenRequests: br.HalfOpenRequests}},
		MaxBodyBytes: cfg.MaxBodyBytes, Passthrough: sec.Passthrough, PrivateModels: sec.PrivateModels, WrapTransport: tr.Transport,
		// The assembler drops late parts on its own; this only stops a
		// preparation that hangs as a whole.
		LoadTimeout: 2*cfg.Memory.LoadTimeout.D() + cfg.Memory.EmbeddingTimeout.D() + 100*time.Millisecond,
		// Anthropic prompts get cache_control after their stable part.
		CacheBreakpoints: cfg.Memory.CacheBreakpoints,
		// Requests resending more history than the Capturer stores say so.
		MaxHistory: cfg.Capture.MaxHistoryMessages,
		// An app's request about a chat (its title, tags) is no turn of it.
		SkipTranscripts: cfg.Capture.SkipTranscripts,
		// The prints other processes share are read as memory is: within
		// memory.load_timeout, past which the check is this process's.
		PrintsTimeout: cfg.Memory.LoadTimeout.D(),
		// With gateway keys and a shared upstream key, stored responses
		// and conversations stay their creator's this long.
		StateRetention: sec.ProviderStateRetention.D(),
	}, proxy.Deps{Resolver: resolver, Preparer: tr.Preparer(rec.Wrap(eng)), Capturer: tr.Capturer(eng), Router: eng, States: eng,
		Browser: chatGuard, Limiter: limiter, Cache: rec, Prints: shared, Resenders: resenders, Held: eng}, logger, reg)
	if err != nil {
		return nil, err
	}
	rc := recallOf(eng, cfg.Recall.Enabled)
	sh := cfg.Memory.Shares
	inspector, err := ui.New(ui.Deps{
		Guard: ui.KeyGuard(resolver, identity.AdminKeyHash(cfg.AdminKey)), Store: eng, Inspect: eng, Footprint: eng, Recall: rc,
		Pinner: eng, Preparer: eng, Savings: eng, Flush: rec.Flush, Metrics: reg,
	}, ui.Options{
		Shares: ui.Shares{Summary: sh.Summary, Pinned: sh.Pinned, Facts: sh.Facts, Recall: sh.Recall}, PreviewModel: cfg.Compaction.Model, MaxHistory: cfg.Capture.MaxHistoryMessages,
		SessionTTL: sec.SessionIdle.D(), SessionMaxAge: sec.SessionMaxAge.D(),
	}, logger)
	if err != nil {
		return nil, err
	}
	routes(srv, eng, limiter, manageGuard, metricsGuard, p,
		admin.New(resolver, eng, rc, eng, cfg.MaxBodyBytes, cfg.Capture.MaxHistoryMessages, logger),
		admin.NewImport(resolver, eng, eng, admin.ImportOptions{MaxMessages: cfg.Capture.ImportMaxMessages, MaxBodyBytes: cfg.MaxBodyBytes}, logger),
		newMCP(cfg, eng, rc, logger).Handler(resolver, cfg.MaxBodyBytes), inspector)
	return &gatewayHTTP{srv: srv, proxy: p, savings: rec}, nil
}

// routes registers every route of the gateway on srv, each surface
// behind its guards: the failed-key limiter, the browser guard manage on
// the management API, MCP and the inspector (nil when a key protects them;
// the proxy holds the /v1 routes' own), and metrics on /metrics.
func routes(srv *server.Server, eng *engine.Engine, limiter *server.FailureLimiter, manage *server.BrowserGuard, metrics echo.MiddlewareFunc,
	p *proxy.Proxy, api *admin.Admin, imp *admin.Import, mcp http.Handler, inspector *ui.UI) {
	// GET /healthz, /readyz, /metrics: the server's own; /healthz/store:
	// 200 while the memory store answers its ping.
	srv.HandleStoreHealth(eng.Ping)
	srv.UsePrefix("/metrics", limiter.Middleware(nil), metrics)
	// /v1/chat/completions, /v1/messages, /v1/responses (POST with memory,
	// the other methods passed through), /v1/messages/*, /v1/*.
	p.Register(srv)
	// /v1/memory/...: preview, conversations, users and their facts, search,
	// import. Bodies are JSON.
	srv.UsePrefix("/v1/memory", limiter.Middleware(nil), manage.Middleware(true, nil))
	api.Register(srv)
	imp.Register(srv)
	// /mcp: the MCP streamable HTTP transport, behind the management rules.
	srv.Echo().Any("/mcp", echo.WrapHandler(mcp), srv.Route("mcp"), limiter.Middleware(nil), manage.Middleware(true, nil))
	// /ui/...: the web inspector (its forms carry CSRF tokens).
	srv.UsePrefix("/ui", limiter.Middleware(nil), manage.Middleware(false, nil))
	inspector.Register(srv)
}

// newMCP returns the MCP tools over eng (rc nil: recall off).
func newMCP(cfg config.Config, eng *engine.Engine, rc recallService, logger *slog.Logger) *mcpserver.Service {
	return mcpserver.New(mcpserver.Deps{Store: eng, Recall: rc, Pinner: eng, Summaries: eng, Preparer: eng},
		mcpserver.Options{Version: buildVersion(), PreviewModel: cfg.Compaction.Model}, logger)
}

// Run serves on ln until ctx ends (see server.Server.Run), flushing the
// savings counters in the background, then waits for the captures of
// finished streams to reach the engine.
func (g *gatewayHTTP) Run(ctx context.Context, ln net.Listener) error {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); g.savings.Run(rctx, savings.DefaultFlushEvery) }()
	defer func() { cancel(); <-done }()
	err := g.srv.Run(ctx, ln)
	g.proxy.Drain()
	g.proxy.CloseIdleConnections()
	return err
}
