package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/memgate/memgate/internal/tracing"
)

// tracingFlushTimeout bounds the export of the spans still buffered at
// shutdown.
const tracingFlushTimeout = 5 * time.Second

// setupTracing configures tracing from the OTEL_* variables (see
// tracing.Setup). When it is on, the provider also becomes the process's
// global one: the enricher's spans, and otel instrumentation in libraries,
// take theirs from it.
func setupTracing(ctx context.Context, getenv func(string) string, logger *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.Setup(ctx, getenv, buildVersion())
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if tr.Enabled {
		otel.SetTracerProvider(tr.Provider)
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("tracing", "error", err)
		}))
	}
	return tr, nil
}

// shutdownTracing exports the spans still buffered.
func shutdownTracing(ctx context.Context, tr *tracing.Tracing, logger *slog.Logger) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
	defer cancel()
	if err := tr.Shutdown(fctx); err != nil {
		logger.Warn("flush traces", "error", err)
	}
}
