// Package tracing sets memgate's OpenTelemetry traces up: the tracer
// provider the standard OTEL_* environment variables configure (off unless
// they ask for an exporter), the server span every request gets, the
// client span of every upstream call, and the spans of the memory core's
// two sides (prepare, capture). The child spans inside the memory path are
// started through internal/telemetry, which needs nothing but the
// request's context.
//
// Off, it costs next to nothing: no exporter, no middleware, no wrappers,
// and telemetry's helpers return at once when the context carries no
// recording span. Attributes never carry message text, keys or user ids
// (user ids only when GATEWAY_TRACE_USER_IDS=true).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ErrUnsupported reports an OTEL_* setting this build cannot honour.
var ErrUnsupported = errors.New("unsupported tracing setting")

// Tracing is the configured tracing: a recording provider when an exporter
// is configured, else a no-op one.
type Tracing struct {
	// Provider makes the tracers; a noop provider when tracing is off.
	Provider trace.TracerProvider
	// Enabled is true when spans are recorded and exported.
	Enabled bool
	// UserIDs is true when spans may carry user ids
	// (GATEWAY_TRACE_USER_IDS=true).
	UserIDs bool
	// Exporter names the exporter, for the start-up log: "none",
	// "otlp/grpc" or "otlp/http".
	Exporter string

	shutdown func(context.Context) error
}

// Off is tracing switched off: a noop provider.
func Off() *Tracing {
	return &Tracing{Provider: noop.NewTracerProvider(), Exporter: "none", shutdown: func(context.Context) error { return nil }}
}

// New returns a Tracing recording through sp (an exporter's processor, or
// a test's span recorder) with the service name and version as resource.
func New(sp sdktrace.SpanProcessor, version string, userIDs bool) *Tracing {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithResource(serviceResource(context.Background(), version)))
	return &Tracing{Provider: tp, Enabled: true, UserIDs: userIDs, Exporter: "custom", shutdown: tp.Shutdown}
}

// Setup reads the standard OpenTelemetry variables through getenv and
// returns the tracing they ask for:
//
//   - OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: off;
//   - OTEL_TRACES_EXPORTER=otlp, or it unset and OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: OTLP, over gRPC or
//     HTTP/protobuf as OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (else
//     OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf) says;
//   - nothing set: off (unlike the specification's default, memgate
//     exports nothing unless asked).
//
// The exporter reads its endpoint, headers, TLS and timeout from the
// process environment (OTEL_EXPORTER_OTLP_*), the sampler from
// OTEL_TRACES_SAMPLER(_ARG), the batching from OTEL_BSP_*, the service name
// and resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func Setup(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	userIDs, _ := strconv.ParseBool(getenv("GATEWAY_TRACE_USER_IDS"))
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		return Off(), nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch exporter {
	case "none":
		return Off(), nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return Off(), nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: %w (use otlp or none)", exporter, ErrUnsupported)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp  sdktrace.SpanExporter
		err  error
		name string
	)
	switch strings.ToLower(strings.TrimSpace(protocol)) {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
		name = "otlp/grpc"
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
		name = "otlp/http"
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: %w (use grpc or http/protobuf)", protocol, ErrUnsupported)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(serviceResource(ctx, version)))
	return &Tracing{Provider: tp, Enabled: true, UserIDs: userIDs, Exporter: name, shutdown: tp.Shutdown}, nil
}

// Shutdown flushes the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

// serviceResource describes the process: service.name memgate (unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise) and its
// version.
func serviceResource(ctx context.Context, version string) *resource.Resource {
	r, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "memgate"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES still leaves the rest.
		return resource.NewSchemaless(attribute.String("service.name", "memgate"), attribute.String("service.version", version))
	}
	return r
}

// SetGlobal makes t's provider the process's global one when tracing is
// on, so spans made outside the request path (the enricher's, otel
// instrumentation in libraries) are exported too; exporter errors go to
// logger.
func (t *Tracing) SetGlobal(logger *slog.Logger) {
	if !t.Enabled {
		return
	}
	otel.SetTracerProvider(t.Provider)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing", "error", err) }))
}

// Start is Setup, then SetGlobal: tracing from the OTEL_* variables as the
// process's global provider. stop exports the spans still buffered, within
// five seconds, logging a failure.
func Start(ctx context.Context, getenv func(string) string, version string, logger *slog.Logger) (t *Tracing, stop func(), err error) {
	if t, err = Setup(ctx, getenv, version); err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	t.SetGlobal(logger)
	return t, func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(fctx); err != nil {
			logger.Warn("flush traces", "error", err)
		}
	}, nil
}
