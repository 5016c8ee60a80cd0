package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/memgate/memgate/internal/memory"
)

type nopPreparer struct{}

func (nopPreparer) Prepare(context.Context, memory.Request) (memory.Prepared, error) {
	return memory.Prepared{}, nil
}

// TestRequestModelBounded: the model comes from the client's body (up to
// max_body_bytes); the request span and the memory.prepare span carry it
// bounded as the breaker does (memory.ModelLabel), so a client cannot make
// every span it causes megabytes long. Names within the bound stay whole.
func TestRequestModelBounded(t *testing.T) {
	long := "ft:" + strings.Repeat("x", 1<<20)
	for _, model := range []string{"gpt-4o-mini", long} {
		rec := tracetest.NewSpanRecorder()
		tr := New(rec, "test", false)
		ctx, req := tr.Provider.Tracer("t").Start(context.Background(), "request")
		if _, err := tr.Preparer(nopPreparer{}).Prepare(ctx, memory.Request{Model: model}); err != nil {
			t.Fatal(err)
		}
		req.End()
		spans := rec.Ended()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want 2", len(spans))
		}
		for _, s := range spans {
			got := ""
			for _, a := range s.Attributes() {
				if a.Key == "gen_ai.request.model" {
					got = a.Value.AsString()
				}
			}
			if want := memory.ModelLabel(model); got != want || len(got) > memory.MaxModelLabel {
				t.Errorf("span %s: gen_ai.request.model of %d bytes, want %q", s.Name(), len(got), memory.Truncate(want, 40))
			}
		}
	}
}
