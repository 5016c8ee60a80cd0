package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// benchUpstream is a minimal upstream that records nothing, so the
// benchmark measures the gateway.
func benchUpstream(tb testing.TB, stream bool) string {
	tb.Helper()
	completion := upstreamtest.Completion("gpt-4o-mini", upstreamtest.DefaultReply)
	var sse bytes.Buffer
	for _, e := range upstreamtest.StreamEvents("gpt-4o-mini", upstreamtest.DefaultReply, true) {
		sse.WriteString("data: " + e + "\n\n")
	}
	sse.WriteString("data: [DONE]\n\n")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(sse.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(completion)
	}))
	tb.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

const benchBody = `{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Tell me about the weather in Lisbon in spring."},{"role":"assistant","content":"It is mild and sunny."},` +
	`{"role":"user","content":"And in autumn?"}]}`

func benchServer(tb testing.TB, stream bool, key string) http.Handler {
	tb.Helper()
	cfg := defaultConfig()
	cfg.Upstream.BaseURL = benchUpstream(tb, stream)
	cfg.Upstream.APIKey = key
	srv, _ := newGateway(tb, cfg, Deps{}, nil, io.Discard)
	return srv.Handler()
}

func benchmarkChat(b *testing.B, stream bool, key string) {
	h := benchServer(b, stream, key)
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-bench")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkChatPassthrough measures a memory-off chat completion through the
// gateway handler, including the loopback round trip to a minimal upstream.
func BenchmarkChatPassthrough(b *testing.B) { benchmarkChat(b, false, "") }

// BenchmarkChatStream is BenchmarkChatPassthrough for a streamed answer.
func BenchmarkChatStream(b *testing.B) { benchmarkChat(b, true, "") }

// BenchmarkChatStreamOperatorKey is BenchmarkChatStream with the
// operator's key, whose streams are scrubbed (scrub.go).
func BenchmarkChatStreamOperatorKey(b *testing.B) { benchmarkChat(b, true, "sk-operator") }

// cannedUpstream answers every request with reply, in process: a
// benchmark measures the gateway's own work, not a loopback round trip.
type cannedUpstream []byte

func (c cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(c)),
		Body: io.NopCloser(bytes.NewReader(c))}, nil
}

// BenchmarkChatGatewayKeys measures a chat completion through the
// gateway handler with gateway keys (four configured, the client's
// checked, the operator's sent upstream) and a user named by the body,
// memory on with no store: the memory route's own work with keys, the
// upstream answering in process.
func BenchmarkChatGatewayKeys(b *testing.B) {
	cfg := defaultConfig()
	cfg.Upstream.APIKey = "sk-operator"
	completion := cannedUpstream(upstreamtest.Completion("gpt-4o-mini", upstreamtest.DefaultReply))
	cfg.WrapTransport = func(http.RoundTripper) http.RoundTripper { return completion }
	var keys []identity.Key
	for i := range 4 {
		keys = append(keys, identity.Key{Hash: identity.HashKey("gw-key-" + strconv.Itoa(i)), Tenant: "t" + strconv.Itoa(i)})
	}
	resolver := &countedResolver{IdentityResolver: identity.New(keys)}
	srv, _ := newGateway(b, cfg, Deps{Resolver: resolver}, nil, io.Discard)
	h := srv.Handler()
	body := []byte(benchBody[:len(benchBody)-1] + `,"user":"ana@example.com"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer gw-key-3")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || w.Header().Get("X-Memory-Conversation") == "" {
			b.Fatalf("status %d, conversation %q: %s", w.Code, w.Header().Get("X-Memory-Conversation"), w.Body)
		}
	}
	b.ReportMetric(float64(resolver.n.Load())/float64(b.N), "resolves/op")
}

// countedResolver counts the identities resolved.
type countedResolver struct {
	IdentityResolver
	n atomic.Int64
}

func (c *countedResolver) Resolve(h http.Header, bodyUser string) (memory.Identity, memory.Mode, error) {
	c.n.Add(1)
	return c.IdentityResolver.Resolve(h, bodyUser)
}
