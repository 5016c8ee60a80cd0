package tracing

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/telemetry"
)

// propagator is the W3C trace context: traceparent and tracestate.
var propagator = propagation.TraceContext{}

// untraced are the routes no span is made for: probes and scrapes.
var untraced = map[string]bool{"/healthz": true, "/healthz/store": true, "/readyz": true, "/metrics": true}

// Middleware returns the echo middleware that gives every request (but
// the probes and /metrics) one server span from t, named by method and
// route pattern ("POST /v1/chat/completions"), the child of the client's W3C
// traceparent when it sent one. The span carries the method, the route
// pattern (never the path, which may hold a user id) and the status.
// Tracing off, it is not installed at all (see Install).
func (t *Tracing) Middleware() echo.MiddlewareFunc {
	tracer := t.Provider.Tracer(telemetry.Scope)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if untraced[route] {
				return next(c)
			}
			r := c.Request()
			ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span := tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route)))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			err := next(c)
			status := c.Response().Status
			if err != nil {
				// The error is written after this middleware returns.
				var he *echo.HTTPError
				var ae *apierr.Error
				switch {
				case errors.As(err, &ae):
					status = ae.Status
				case errors.As(err, &he):
					status = he.Code
				default:
					status = http.StatusInternalServerError
				}
				span.RecordError(err)
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, strconv.Itoa(status))
			}
			return err
		}
	}
}

// Install adds the request span middleware to e when tracing is on.
func (t *Tracing) Install(e *echo.Echo) {
	if t.Enabled {
		e.Use(t.Middleware())
	}
}

// Transport wraps an upstream transport so each upstream call is a client
// span of the request's, and carries its traceparent upstream. Tracing off,
// rt is returned unchanged (the client's own traceparent, if any, is then
// forwarded as the client sent it).
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if !t.Enabled {
		return rt
	}
	return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(t.Provider), otelhttp.WithPropagators(propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "upstream " + r.Method }))
}
