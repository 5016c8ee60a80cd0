// Package proxy is memgate's HTTP front: an OpenAI-compatible reverse proxy
// that forwards every /v1 route to the upstream unchanged, except that chat
// completions pass through a memory seam (Preparer rewrites the messages,
// Capturer receives the finished exchange). It owns upstream retries, circuit
// breakers, SSE relaying, metrics and the translation of errors into
// OpenAI-shaped JSON.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/coarse"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/httpserve"
)

// Deps are the proxy's optional collaborators. With all of them nil the
// proxy is a plain OpenAI pass-through.
type Deps struct {
	// Resolver maps a request to its identity and memory mode; nil means
	// memory is off for every request and no gateway key is checked.
	Resolver IdentityResolver
	// Preparer rewrites the messages of memory-on chat requests.
	Preparer Preparer
	// Capturer receives completed exchanges of storing modes.
	Capturer Capturer
	// Ready reports whether the proxy's dependencies can serve; /readyz
	// answers 503 while it fails. nil means always ready.
	Ready func(ctx context.Context) error
	// Admin serves the memory management API (/v1/memory/conversations,
	// /v1/memory/users); nil answers it with 503.
	Admin MemoryAdmin
	// Recall serves the facts and search management API
	// (/v1/memory/users/{user}/facts, /v1/memory/search); nil answers it with 503.
	Recall RecallAdmin
	// Collectors are extra Prometheus collectors exposed on /metrics.
	Collectors []prometheus.Collector
}

// Server is the gateway's HTTP server.
type Server struct {
	cfg      config.Config
	deps     Deps
	log      *slog.Logger
	m        *metrics
	up       *upstream
	breakers *breakers
	handler  http.Handler
	idPrefix string

	// baseCtx is the parent of every request context; cancelling it ends
	// the streams still running when the shutdown grace period is over.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	srv        httpServer
	shutdown   sync.Once
	done       chan struct{}
	// captures are the stream captures still being reassembled after
	// their response ended; Shutdown waits for them.
	captures sync.WaitGroup
}

// New returns a Server forwarding to cfg.Upstream, ready to Run.
func New(cfg config.Config, deps Deps, logger *slog.Logger) (*Server, error) {
	m, err := newMetrics(deps.Collectors)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	s := &Server{cfg: cfg, deps: deps, log: logger, m: m, idPrefix: newIDPrefix(), done: make(chan struct{})}
	s.breakers = newBreakers(cfg.Upstream.Breaker, m, logger)
	// One clock for the per-request timeouts of the client and upstream
	// connections: arming a runtime timer per request woke a thread.
	clock := coarse.New(timeoutResolution)
	if s.up, err = newUpstream(cfg.Upstream, s.breakers, m, clock); err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// echo's own rare warnings go to the structured log.
	e.Logger.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelWarn).Writer())
	e.HTTPErrorHandler = s.echoError
	s.routes(e)
	s.handler = e
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	// No write timeout: streams last as long as the model writes.
	if cfg.HTTPServer == "stdlib" {
		s.srv = &http.Server{
			Handler:           e,
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
	} else {
		s.srv = &httpserve.Server{
			Handler:           e,
			BaseContext:       s.baseCtx,
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			Logger:            logger,
			Clock:             clock,
		}
	}
	return s, nil
}

// Timeouts of the client connections.
const (
	// timeoutResolution is how late a per-request timeout may fire.
	timeoutResolution = 5 * time.Millisecond
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
)

// httpServer is what Run and Shutdown need of net/http's server or
// httpserve's.
type httpServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// Handler returns the gateway's HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves on ln until ctx ends, then shuts down gracefully (see
// Shutdown). It returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			// Shutdown was called directly; wait for it to finish.
			<-s.done
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	err := s.Shutdown(context.WithoutCancel(ctx))
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return errors.Join(err, serr)
	}
	return err
}

// Shutdown stops accepting connections and waits for in-flight requests,
// streams included, for up to ShutdownGrace; the ones still running then are
// cancelled (their upstream requests too) and their connections closed.
// Shutdown returns when every handler has returned (or ctx ended) and every
// finished exchange was handed to the Capturer.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdown.Do(func() {
		defer close(s.done)
		// Streams that ended hand their exchange to the Capturer before
		// the caller closes it.
		defer s.captures.Wait()
		grace := s.cfg.ShutdownGrace.D()
		gctx, cancel := context.WithTimeout(ctx, grace)
		defer cancel()
		s.log.Info("shutting down", "grace", grace.String())
		err = s.srv.Shutdown(gctx)
		if err == nil {
			return
		}
		s.log.Warn("shutdown grace period over, cancelling in-flight requests")
		s.cancelBase()
		// Handlers see their context end and return; give them a moment
		// before their connections are cut.
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		defer fcancel()
		if s.srv.Shutdown(fctx) != nil {
			s.srv.Close()
		}
		err = nil
	})
	<-s.done
	s.cancelBase()
	return err
}

// echoError answers requests echo's router rejects (unknown route, wrong
// method) in OpenAI error shape.
func (s *Server) echoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := http.StatusInternalServerError
	msg := "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
		msg = fmt.Sprint(he.Message)
	}
	typ := typeInvalidRequest
	if status >= 500 {
		typ = typeServer
		s.log.Error("handler error", "error", err)
	}
	writeError(c.Response(), &apiError{Status: status, Type: typ, Message: msg})
}
