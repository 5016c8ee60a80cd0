package tracing

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// Preparer is the memory core's request side (the proxy's Preparer).
type Preparer interface {
	Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error)
}

// Capturer is the memory core's capture side (the proxy's Capturer).
type Capturer interface {
	Capture(ctx context.Context, ex memory.Exchange) bool
}

// Preparer wraps p so each preparation is a "memory.prepare" span (the
// parts' loads and the assembly are its children), and the request's span
// and it carry the tenant, model, token counts and degraded parts (and the
// user id when t.UserIDs). Tracing off, p is returned unchanged.
func (t *Tracing) Preparer(p Preparer) Preparer {
	if !t.Enabled || p == nil {
		return p
	}
	return tracedPreparer{inner: p, userIDs: t.UserIDs}
}

// Capturer wraps c so each capture is a "memory.capture" span, and the
// exchange carries the request's traceparent through the queues to the
// enrichment it causes. Tracing off, c is returned unchanged.
func (t *Tracing) Capturer(c Capturer) Capturer {
	if !t.Enabled || c == nil {
		return c
	}
	return tracedCapturer{inner: c}
}

type tracedPreparer struct {
	inner   Preparer
	userIDs bool
}

// identity returns the attributes naming whose memory a span is about
// (the model, from the client's body, bounded by memory.ModelLabel).
func identity(id memory.Identity, model string, userIDs bool) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("memgate.tenant", id.Tenant), attribute.String("gen_ai.request.model", memory.ModelLabel(model))}
	if userIDs {
		attrs = append(attrs, attribute.String("memgate.user", id.User))
	}
	return attrs
}

func (p tracedPreparer) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	attrs := identity(req.Identity, req.Model, p.userIDs)
	reqSpan := trace.SpanFromContext(ctx)
	reqSpan.SetAttributes(attrs...)
	ctx, span := telemetry.Start(ctx, "memory.prepare", attrs...)
	prep, err := p.inner.Prepare(ctx, req)
	out := outcome(prep, err)
	span.SetAttributes(out...)
	reqSpan.SetAttributes(out...)
	telemetry.End(span, err)
	return prep, err
}

// outcome is what a preparation did, as attributes: the token counts and
// the degraded parts ("all" or "store" when it failed as a whole, as the
// proxy reports it).
func outcome(prep memory.Prepared, err error) []attribute.KeyValue {
	if err != nil {
		part := memory.DegradedAll
		if errors.Is(err, memory.ErrUnavailable) {
			part = memory.DegradedStore
		}
		return []attribute.KeyValue{attribute.String("memgate.degraded", part)}
	}
	return []attribute.KeyValue{
		attribute.Int("memgate.tokens.original", prep.TokensOriginal),
		attribute.Int("memgate.tokens.sent", prep.TokensSent),
		attribute.Int("memgate.tokens.budget", prep.Budget),
		attribute.Bool("memgate.over_budget", prep.OverBudget),
		attribute.String("memgate.degraded", strings.Join(prep.Degraded, ",")),
	}
}

type tracedCapturer struct{ inner Capturer }

func (c tracedCapturer) Capture(ctx context.Context, ex memory.Exchange) bool {
	if ex.TraceParent == "" {
		ex.TraceParent = telemetry.TraceParent(ctx)
	}
	ctx, span := telemetry.Start(ctx, "memory.capture", attribute.String("memgate.tenant", ex.Tenant))
	defer span.End()
	return c.inner.Capture(ctx, ex)
}
