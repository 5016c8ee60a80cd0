package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// routes lists every route the gateway serves.
func (s *Server) routes(e *echo.Echo) {
	pass := s.instrument("passthrough", s.handlePassthrough(s.newReverseProxy()))
	e.POST("/v1/chat/completions", s.instrument("chat", s.handleChat))
	// Stored chat completions (GET, DELETE) and CORS preflights are the
	// upstream's business.
	e.Match([]string{http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodPut, http.MethodPatch, http.MethodOptions}, "/v1/chat/completions", pass)
	e.POST("/v1/memory/preview", s.instrument("preview", s.handlePreview))
	s.adminRoutes(e)
	s.recallRoutes(e)
	e.Any("/v1/*", pass)
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", echo.WrapHandler(s.m.handler()))
}

// handleHealthz reports that the process serves HTTP.
func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSONBlob(http.StatusOK, []byte(`{"status":"ok"}`))
}

// handleReadyz reports whether the dependencies checked by Deps.Ready work.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.deps.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.deps.Ready(ctx); err != nil {
			s.log.Warn("not ready", "error", err)
			return c.JSONBlob(http.StatusServiceUnavailable, []byte(`{"status":"unavailable"}`))
		}
	}
	return c.JSONBlob(http.StatusOK, []byte(`{"status":"ready"}`))
}
