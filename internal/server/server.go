// Package server is memgate's HTTP front end: net/http's http.Server, with
// the timeouts and limits a gateway in front of every user needs, behind an
// echo instance whose middleware gives each request an id, recovers panics,
// records Prometheus metrics and writes one access-log line. It serves
// /healthz, /readyz and /metrics itself; the packages that own the other
// routes (proxy, admin) register them on Echo.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memgate/memgate/internal/apierr"
)

// Limits of the client connections.
const (
	// ReadHeaderTimeout bounds reading a request's head: a connection that
	// sends nothing, or a head slowly, is closed after it.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection idle for this long.
	IdleTimeout = 120 * time.Second
	// MaxHeaderBytes caps a request head (net/http answers 431 beyond it).
	MaxHeaderBytes = 64 << 10
)

// ErrShutdown is the cause of the request contexts cancelled when the
// shutdown grace period is over.
var ErrShutdown = errors.New("server shutting down")

// Server is the gateway's HTTP server.
type Server struct {
	echo  *echo.Echo
	srv   *http.Server
	log   *slog.Logger
	grace time.Duration
	m     *metrics
	ready func(context.Context) error

	// baseCtx is the parent of every request context; cancelling it (with
	// ErrShutdown) ends the streams still running after the grace period.
	baseCtx    context.Context
	cancelBase context.CancelCauseFunc
	shutdown   sync.Once
	done       chan struct{}
	// shuttingDown turns /readyz to 503 once Shutdown began.
	shuttingDown atomic.Bool
}

// New returns a server whose metrics go to reg (also served on /metrics).
// ready reports whether the gateway can serve chat; /readyz answers 503
// while it fails, and while the server shuts down (nil: ready until then). In-flight requests get
// grace to finish at shutdown.
func New(reg *prometheus.Registry, ready func(context.Context) error, grace time.Duration, logger *slog.Logger) (*Server, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register http metrics: %w", err)
	}
	s := &Server{log: logger, grace: grace, m: m, ready: ready, done: make(chan struct{})}
	s.baseCtx, s.cancelBase = context.WithCancelCause(context.Background())
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// echo's own rare warnings go to the structured log.
	e.Logger.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelWarn).Writer())
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe, middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisablePrintStack: true,
		LogErrorFunc: func(c echo.Context, err error, _ []byte) error {
			s.log.Error("handler panic", "request_id", RequestID(c), "error", err)
			return err
		},
	}), unescapeParams)
	e.GET("/healthz", handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	s.echo = e
	// No WriteTimeout and no ReadTimeout: both would cut streams that
	// last as long as the model writes (net/http cancels a request whose
	// connection read deadline passes). Handlers bound their body reads.
	s.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// UsePrefix runs mw, in order, on every request whose path is prefix or
// under it ("/ui" covers "/ui" and "/ui/users", not "/uix"), whichever
// package registered the route, and on the unknown paths there too: the
// way to put one guard in front of a whole surface (the management API,
// the inspector).
func (s *Server) UsePrefix(prefix string, mw ...echo.MiddlewareFunc) {
	prefix = strings.TrimSuffix(prefix, "/")
	for _, m := range mw {
		s.echo.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			guarded := m(next)
			return func(c echo.Context) error {
				p := c.Request().URL.Path
				if p == prefix || strings.HasPrefix(p, prefix+"/") {
					return guarded(c)
				}
				return next(c)
			}
		})
	}
}

// Echo returns the echo instance, for registering routes.
func (s *Server) Echo() *echo.Echo { return s.echo }

// Handler returns the gateway's HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.echo }

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
// streams included, for up to the grace period; the ones still running then
// are cancelled (their upstream requests too) with ErrShutdown as the cause
// and their connections closed. It returns when every handler has returned
// or ctx ended.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shuttingDown.Store(true)
	s.shutdown.Do(func() {
		defer close(s.done)
		gctx, cancel := context.WithTimeout(ctx, s.grace)
		defer cancel()
		s.log.Info("shutting down", "grace", s.grace.String())
		if err = s.srv.Shutdown(gctx); err == nil {
			return
		}
		s.log.Warn("shutdown grace period over, cancelling in-flight requests")
		s.cancelBase(ErrShutdown)
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
	s.cancelBase(ErrShutdown)
	return err
}

// HandleStoreHealth serves GET /healthz/store: 200 when check (the memory
// store's ping) succeeds within two seconds, else 503. Chat is served either
// way; /readyz does not depend on the store.
func (s *Server) HandleStoreHealth(check func(context.Context) error) {
	s.echo.GET("/healthz/store", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := check(ctx); err != nil {
			s.log.Debug("store unhealthy", "error", err)
			return c.JSONBlob(http.StatusServiceUnavailable, []byte(`{"status":"unavailable"}`))
		}
		return c.JSONBlob(http.StatusOK, []byte(`{"status":"ok"}`))
	})
}

// handleError answers what echo's router rejects (unknown route, wrong
// method) and errors handlers return, in OpenAI error shape.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		apierr.Write(c.Response(), ae)
		return
	}
	status, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status, msg = he.Code, fmt.Sprint(he.Message)
	}
	typ := apierr.TypeInvalidRequest
	if status >= 500 {
		typ = apierr.TypeServer
		s.log.Error("handler error", "request_id", RequestID(c), "error", err)
	}
	apierr.Write(c.Response(), &apierr.Error{Status: status, Type: typ, Message: msg})
}

// handleHealthz reports that the process serves HTTP.
func handleHealthz(c echo.Context) error {
	return c.JSONBlob(http.StatusOK, []byte(`{"status":"ok"}`))
}

// handleReadyz reports whether the dependencies checked by ready work.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.baseCtx.Err() != nil || s.shuttingDown.Load() {
		return c.JSONBlob(http.StatusServiceUnavailable, []byte(`{"status":"shutting down"}`))
	}
	if s.ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			s.log.Warn("not ready", "error", err)
			return c.JSONBlob(http.StatusServiceUnavailable, []byte(`{"status":"unavailable"}`))
		}
	}
	return c.JSONBlob(http.StatusOK, []byte(`{"status":"ready"}`))
}

// Healthcheck asks the /healthz of the gateway listening on listen (an
// unspecified host means this machine) and returns an error unless it
// answers 200 within three seconds: the health check of container images
// without curl.
func Healthcheck(ctx context.Context, listen string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: status %d", resp.StatusCode)
	}
	return nil
}
