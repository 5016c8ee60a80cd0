package tracing

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/memgate/memgate/internal/apierr"
)

// TestMiddleware: one server span per request, named by the route pattern
// (never the path, which holds a user id), the child of the client's
// traceparent, with the status the handler's error will be written with;
// probes get none.
func TestMiddleware(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := New(rec, "test", false)
	e := echo.New()
	tr.Install(e)
	e.GET("/v1/memory/users/:user/facts", func(c echo.Context) error {
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Message: "no"}
	})
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })

	r := httptest.NewRequest(http.MethodGet, "/v1/memory/users/alice-secret/facts", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	e.ServeHTTP(httptest.NewRecorder(), r)
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want one (none for /healthz)", len(spans))
	}
	s := spans[0]
	if s.Name() != "GET /v1/memory/users/:user/facts" {
		t.Fatalf("span name %q", s.Name())
	}
	if s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatal("the span is not the child of the client's traceparent")
	}
	for _, a := range s.Attributes() {
		if a.Value.Emit() == "alice-secret" || a.Key == "url.path" {
			t.Fatalf("attribute %s = %s carries the path", a.Key, a.Value.Emit())
		}
		if a.Key == "http.response.status_code" && a.Value.AsInt64() != http.StatusNotFound {
			t.Fatalf("status %d, want 404", a.Value.AsInt64())
		}
	}
}

func TestOffInstallsNothing(t *testing.T) {
	tr := Off()
	e := echo.New()
	tr.Install(e)
	traced := true
	e.GET("/x", func(c echo.Context) error {
		traced = trace.SpanContextFromContext(c.Request().Context()).IsValid()
		return nil
	})
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	e.ServeHTTP(httptest.NewRecorder(), r)
	if traced {
		t.Fatal("tracing off must add no middleware")
	}
	rt := http.DefaultTransport
	if tr.Transport(rt) != rt {
		t.Fatal("tracing off must leave the upstream transport alone")
	}
	if tr.Preparer(nil) != nil || tr.Capturer(nil) != nil {
		t.Fatal("nil stays nil")
	}
}
