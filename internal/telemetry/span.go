// Package telemetry starts memgate's OpenTelemetry spans inside the memory
// path (loads, assembly, embedding, store calls, enrichment) from the
// request's context alone: a child span comes from the provider of the
// recording span the context carries, so no package holds a tracer, and
// with tracing off (no recording span) every helper returns at once,
// allocating nothing. internal/tracing sets the provider and the request
// spans up.
package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of memgate's spans.
const Scope = "github.com/memgate/memgate"

// noSpan is what the helpers return when nothing records.
var noSpan trace.Span = noop.Span{}

// Start starts a child span of the recording span ctx carries, from that
// span's provider. Without one (tracing off, or an unsampled request) it
// returns ctx and a no-op span at once, allocating nothing.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noSpan
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithAttributes(attrs...))
}

// Span starts a child span as Start does, replacing *ctx with the span's
// context, and returns the function that ends it: the one line a store or
// loader adds at its entry is
//
//	defer telemetry.Span(&ctx, "sqlite.recent")()
func Span(ctx *context.Context, name string) func() {
	if !trace.SpanFromContext(*ctx).IsRecording() {
		return nop
	}
	var span trace.Span
	*ctx, span = Start(*ctx, name)
	return func() { span.End() }
}

func nop() {}

// End records err (when not nil) on span as its status and ends it.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceParent returns the W3C traceparent of the span ctx carries, "" when
// none is sampled: stored with queued work, it lets the span of that work
// link back to the request that caused it (see Links).
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Links returns a span link to each valid traceparent, duplicates once.
func Links(traceparents []string) []trace.Link {
	var links []trace.Link
	seen := map[string]bool{}
	for _, tp := range traceparents {
		if tp == "" || seen[tp] {
			continue
		}
		seen[tp] = true
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
		if sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return links
}

// StartLinked starts a root span from tp (nil: no span) linked to the
// requests whose traceparents are given: the span of background work
// (enrichment) that those requests caused.
func StartLinked(ctx context.Context, tp trace.TracerProvider, name string, traceparents []string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tp == nil {
		return ctx, noSpan
	}
	return tp.Tracer(Scope).Start(ctx, name, trace.WithNewRoot(), trace.WithLinks(Links(traceparents)...), trace.WithAttributes(attrs...))
}

// Note sets the string attribute key on the span ctx carries, when it
// records: what a step decided, on the step's span.
func Note(ctx context.Context, key, value string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(key, value))
	}
}
