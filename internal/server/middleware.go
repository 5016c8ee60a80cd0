package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// observe is the outermost middleware: it gives the request its id and
// Exchange, and when it ends records its metrics and
// writes one access-log line at info (request id, route, method, status,
// durations, and for memory-on chat requests the tokens sent and saved and
// the degraded parts; never headers, bodies or keys). A request aborted with
// http.ErrAbortHandler is recorded (499, or the status the handler set, or
// 503 when shutdown cut it) and the panic goes on to net/http.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	prefix := newIDPrefix()
	other := s.m.route("other")
	return func(c echo.Context) (err error) {
		start := time.Now()
		r := c.Request()
		x := &Exchange{id: requestID(r.Header.Get(echo.HeaderXRequestID), prefix), rm: other, route: "other"}
		c.Response().Header()[echo.HeaderXRequestID] = []string{x.id}
		ctx := contextWithExchange(r.Context(), x)
		c.SetRequest(r.WithContext(ctx))
		aborted := true
		defer func() {
			status := c.Response().Status
			switch {
			case x.status != 0:
				status = x.status
			case aborted && context.Cause(ctx) == ErrShutdown:
				status = http.StatusServiceUnavailable
			case aborted:
				status = StatusClientClosed
			}
			total := time.Since(start)
			x.rm.observe(status, total, x.upstream)
			attrs := []slog.Attr{
				slog.String("request_id", x.id), slog.String("route", x.route), slog.String("method", r.Method),
				slog.Int("status", status), slog.Duration("duration", total), slog.Duration("upstream", x.upstream),
			}
			if x.mem != nil {
				attrs = append(attrs, slog.Int("tokens_sent", x.mem.sent), slog.Int("tokens_saved", x.mem.saved),
					slog.String("degraded", x.mem.degraded))
			}
			s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
		}()
		if err := next(c); err != nil {
			// Written now, so the status is known to the log and metrics.
			c.Error(err)
		}
		aborted = false
		return nil
	}
}

// Route returns the middleware that names a route in metrics and logs
// (e.g. "chat", "passthrough", "memory_admin") and counts its requests in
// flight; unnamed routes (health, metrics, unknown paths) are "other".
func (s *Server) Route(name string) echo.MiddlewareFunc {
	rm := s.m.route(name)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if x := ExchangeOf(c.Request().Context()); x != nil {
				x.rm, x.route = rm, name
			}
			s.m.inFlight.Inc()
			defer s.m.inFlight.Dec()
			return next(c)
		}
	}
}

// unescapeParams decodes the percent-encoding of a route's named path
// parameters (a user id "bob@example.com" sent as "bob%40example.com", as
// JavaScript's encodeURIComponent writes it), which echo leaves encoded
// when the request's path has a raw form: a handler reads an id as the
// client meant it. A malformed escape is a 400. Wildcards ("*") are left
// as routed. Without a raw form echo routes the decoded path, whose
// parameters are decoded already: decoding them again would read a '%'
// the client escaped ("a%2541" for the value "a%41") as an escape.
func unescapeParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().URL.RawPath == "" {
			return next(c)
		}
		names, values := c.ParamNames(), c.ParamValues()
		var out []string
		for i, v := range values {
			if i >= len(names) || names[i] == "*" || !strings.Contains(v, "%") {
				continue
			}
			u, err := url.PathUnescape(v)
			if err != nil {
				return echo.NewHTTPError(http.StatusBadRequest, "malformed percent-encoding in the path")
			}
			if out == nil {
				out = slices.Clone(values)
			}
			out[i] = u
		}
		if out != nil {
			c.SetParamValues(out...)
		}
		return next(c)
	}
}
