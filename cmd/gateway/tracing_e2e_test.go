package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/tracing"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// startTracedGateway is startGateway with tracing tr; the process's global
// provider (the enricher's) is tr's too until the test ends.
func startTracedGateway(t testing.TB, cfg config.Config, tr *tracing.Tracing) string {
	t.Helper()
	otel.SetTracerProvider(tr.Provider)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	return startGatewayWith(t, cfg, tr).URL
}

// spanTree indexes recorded spans of one trace by id.
type spanTree struct {
	byID map[trace.SpanID]sdktrace.ReadOnlySpan
}

func treeOf(spans []sdktrace.ReadOnlySpan, tid trace.TraceID) spanTree {
	t := spanTree{byID: map[trace.SpanID]sdktrace.ReadOnlySpan{}}
	for _, s := range spans {
		if s.SpanContext().TraceID() == tid {
			t.byID[s.SpanContext().SpanID()] = s
		}
	}
	return t
}

// named returns the spans called name.
func (t spanTree) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range t.byID {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one span called name, failing the test otherwise.
func (t spanTree) one(tb testing.TB, name string) sdktrace.ReadOnlySpan {
	tb.Helper()
	got := t.named(name)
	if len(got) != 1 {
		var names []string
		for _, s := range t.byID {
			names = append(names, s.Name())
		}
		tb.Fatalf("want one span %q, got %d; spans: %v", name, len(got), names)
	}
	return got[0]
}

// under reports whether s descends from ancestor.
func (t spanTree) under(s, ancestor sdktrace.ReadOnlySpan) bool {
	for p := s.Parent().SpanID(); p.IsValid(); {
		if p == ancestor.SpanContext().SpanID() {
			return true
		}
		ps, ok := t.byID[p]
		if !ok {
			return false
		}
		p = ps.Parent().SpanID()
	}
	return false
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit(), true
		}
	}
	return "", false
}

// TestTraceOfAMemoryOnRequest: one memory-on chat request, sent with a
// client traceparent, is one server span in the client's trace whose
// children are the preparation (each memory part's load, the query's
// embedding, the assembly, the store calls under them), the upstream call
// (which carries the trace upstream) and the capture; the enrichment it
// causes is a span of its own linked to it. No span carries the user id,
// the message text or a key.
func TestTraceOfAMemoryOnRequest(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	cfg := storeConfigs(t, up)["sqlite"](t)
	rec := tracetest.NewSpanRecorder()
	url := startTracedGateway(t, cfg, tracing.New(rec, "test", false))
	const userID = "traced-user-7f3a"
	const stated = "I live in Lisbon and I cycle to work every day."
	const question = "Which bike shop near me would you suggest?"
	hdr := headers("", userID, "trip")
	if r := chat(t, url, hdr, false, user(stated)); r.Status != http.StatusOK {
		t.Fatalf("first chat: %d %s", r.Status, r.Body)
	}

	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const clientSpan = "00f067aa0ba902b7"
	hdr["traceparent"] = "00-" + clientTrace + "-" + clientSpan + "-01"
	if r := chat(t, url, hdr, false, user(question)); r.Status != http.StatusOK {
		t.Fatalf("traced chat: %d %s", r.Status, r.Body)
	}
	tid, _ := trace.TraceIDFromHex(clientTrace)

	// The upstream saw the trace: a traceparent of the same trace, from a
	// span of the gateway's.
	// (Enrichment calls the same upstream, at its own time: the traced
	// request is the first that carries the question; the enrichment of its
	// exchange can only come after it.)
	var last upstreamtest.Request
	for _, r := range up.Requests() {
		if strings.Contains(string(r.Body), question) {
			last = r
			break
		}
	}
	if last.Header == nil {
		t.Fatal("the upstream never received the traced question")
	}
	if tp := last.Header.Get("traceparent"); !strings.Contains(tp, clientTrace) || strings.Contains(tp, clientSpan) {
		t.Fatalf("upstream traceparent = %q, want trace %s from a gateway span", tp, clientTrace)
	}

	// The enrichment of the traced exchange ends after the request.
	var enrich sdktrace.ReadOnlySpan
	eventually(t, "an enrichment span linked to the traced request", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() != "memory.enrich" {
				continue
			}
			for _, l := range s.Links() {
				if l.SpanContext.TraceID() == tid {
					enrich = s
					return true
				}
			}
		}
		return false
	})
	if enrich.SpanContext().TraceID() == tid {
		t.Fatal("the enrichment span must start its own trace, linked to the request's")
	}

	spans := rec.Ended()
	tree := treeOf(spans, tid)
	root := tree.one(t, "POST /v1/chat/completions")
	if got := root.Parent().SpanID().String(); got != clientSpan || !root.Parent().IsRemote() {
		t.Fatalf("server span parent = %s (remote %v), want the client's %s", got, root.Parent().IsRemote(), clientSpan)
	}
	if root.SpanKind() != trace.SpanKindServer {
		t.Fatalf("server span kind = %v", root.SpanKind())
	}
	for key, want := range map[string]string{"http.route": "/v1/chat/completions", "memgate.tenant": "default", "gen_ai.request.model": "gpt-4o-mini", "http.response.status_code": "200"} {
		if got, _ := attr(root, key); got != want {
			t.Errorf("server span %s = %q, want %q", key, got, want)
		}
	}
	if sent, ok := attr(root, "memgate.tokens.sent"); !ok || sent == "0" {
		t.Errorf("server span memgate.tokens.sent = %q, want a count", sent)
	}
	if _, ok := attr(root, "memgate.degraded"); !ok {
		t.Error("server span has no memgate.degraded")
	}

	prepare := tree.one(t, "memory.prepare")
	for _, name := range []string{"memory.load.history", "memory.load.facts", "memory.load.recall", "memory.load.summary", "memory.assemble"} {
		if s := tree.one(t, name); !tree.under(s, prepare) {
			t.Errorf("%s is not under memory.prepare", name)
		}
	}
	if s := tree.one(t, "memory.embed"); !tree.under(s, tree.one(t, "memory.load.recall")) {
		t.Error("memory.embed is not under memory.load.recall")
	}
	// The recent turns come from the engine's cache when the previous
	// turn's save appended to them (no store span); a read of the store is
	// under the history part.
	for _, s := range tree.named("sqlite.Recent") {
		if !tree.under(s, tree.one(t, "memory.load.history")) {
			t.Error("sqlite.Recent is not under memory.load.history")
		}
	}
	if s := tree.one(t, "sqlite.SearchVector"); !tree.under(s, tree.one(t, "memory.load.recall")) {
		t.Error("sqlite.SearchVector is not under memory.load.recall")
	}
	if len(tree.named("sqlite.SearchText")) == 0 {
		t.Error("no store span for the recall's text search")
	}
	upstream := tree.one(t, "upstream POST")
	if !tree.under(upstream, root) || upstream.SpanKind() != trace.SpanKindClient {
		t.Error("the upstream call is not a client span under the request")
	}
	capture := tree.one(t, "memory.capture")
	if !tree.under(capture, root) {
		t.Error("memory.capture is not under the request")
	}
	if !tree.under(prepare, root) {
		t.Error("memory.prepare is not under the request")
	}

	// Nothing recorded carries the user id, the conversation's words or a key.
	for _, s := range spans {
		for _, a := range s.Attributes() {
			v := a.Value.Emit()
			for _, secret := range []string{userID, "Lisbon", "bike shop", "test-upstream-key"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s = %q carries %q", s.Name(), a.Key, v, secret)
				}
			}
		}
	}
}

// TestTracingOffForwardsTheClientTraceparent: with tracing off the client's
// traceparent still reaches the upstream, unchanged.
func TestTracingOffForwardsTheClientTraceparent(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	g := startGateway(t, storeConfigs(t, up)["sqlite"](t))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []any{user("hello")}})
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", "u1")
	req.Header.Set("traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The chat is the upstream's first request: enrichment's side calls,
	// which may follow before this line runs, carry no client header.
	if got := up.Requests()[0].Header.Get("traceparent"); got != tp {
		t.Fatalf("upstream traceparent = %q, want the client's %q", got, tp)
	}
}
