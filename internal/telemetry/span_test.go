package telemetry

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestOffCostsNothing: without a recording span in the context the helpers
// hand the context back and allocate nothing.
func TestOffCostsNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, "x")
		End(span, nil)
		defer Span(&c, "y")()
	})
	if allocs != 0 {
		t.Fatalf("helpers off allocate %v times per call", allocs)
	}
	if c, _ := Start(ctx, "x"); c != ctx {
		t.Fatal("Start off must return ctx itself")
	}
}

func TestChildSpansAndLinks(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, root := tp.Tracer("t").Start(context.Background(), "root")
	c, child := Start(ctx, "child")
	func() { defer Span(&c, "grandchild")() }()
	End(child, errors.New("boom"))
	parent := TraceParent(ctx)
	root.End()

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	if spans["child"].Parent().SpanID() != spans["root"].SpanContext().SpanID() ||
		spans["grandchild"].Parent().SpanID() != spans["child"].SpanContext().SpanID() {
		t.Fatal("the spans do not nest root > child > grandchild")
	}
	if spans["child"].Status().Code != codes.Error {
		t.Fatal("End must record the error as the span's status")
	}

	_, linked := StartLinked(context.Background(), tp, "enrich", []string{parent, parent, "", "garbage"})
	linked.End()
	var enrich sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "enrich" {
			enrich = s
		}
	}
	if enrich.SpanContext().TraceID() == spans["root"].SpanContext().TraceID() {
		t.Fatal("a linked span starts a trace of its own")
	}
	if len(enrich.Links()) != 1 || enrich.Links()[0].SpanContext.SpanID() != spans["root"].SpanContext().SpanID() {
		t.Fatalf("links = %+v, want one to the root span", enrich.Links())
	}
	if TraceParent(context.Background()) != "" {
		t.Fatal("no span, no traceparent")
	}
}
