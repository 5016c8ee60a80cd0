package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/mcpserver"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/tokens"
	"github.com/memgate/memgate/internal/tracing"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// echoUpstream answers every chat completion with "ack: <last user text>",
// as JSON or SSE depending on the request.
func echoUpstream() http.Handler {
	return answeringUpstream(func(last string) string { return "ack: " + last })
}

// answeringUpstream answers each chat completion answer(<last user
// message>).
func answeringUpstream(answer func(last string) string) http.Handler {
	return goingOnUpstream(func(last string, _ bool) string { return answer(last) })
}

// goingOnUpstream answers each chat completion answer(last, goOn): last
// is its last user message, goOn whether its last message, system ones
// aside, is an assistant's (the client asks the model to go on with that
// reply: "continue").
func goingOnUpstream(answer func(last string, goOn bool) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		json.Unmarshal(body, &req)
		last, role := "", ""
		for _, raw := range req.Messages {
			m, err := memory.ParseMessage(raw)
			if err != nil || memory.IsSystem(m.Role) {
				continue
			}
			if role = m.Role; role == "user" {
				last = m.Content
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		upstreamtest.Chat(upstreamtest.Reply{Content: answer(last, role == "assistant")}).ServeHTTP(w, r)
	})
}

// testGateway is the real gateway wiring (openMemory + proxy) served by
// httptest, with its capture worker running.
type testGateway struct {
	URL  string
	mem  *memoryLayer
	stop func()
}

var sharedCounter = sync.OnceValues(func() (*tokens.Counter, error) { return tokens.New(nil) })

// engineFor is an engine with core connected, running no workers.
func engineFor(core *engine.Core) *engine.Engine {
	e := engine.New(engine.Options{}, slog.New(slog.DiscardHandler))
	e.Use(core)
	return e
}

// mcpFor is the MCP service over core, as mcpStdio wires it.
func mcpFor(cfg config.Config, core *engine.Core, logger *slog.Logger) *mcpserver.Service {
	eng := engineFor(core)
	return newMCP(cfg, eng, recallOf(eng, core.Recall != nil), logger)
}

// newTestHTTP wires the HTTP side over core, with tracing tr (nil: off).
func newTestHTTP(cfg config.Config, core *engine.Core, tr *tracing.Tracing, logger *slog.Logger) (*gatewayHTTP, error) {
	if tr == nil {
		tr = tracing.Off()
	}
	return newHTTP(cfg, engineFor(core), nil, tr, prometheus.NewRegistry(), logger)
}

// startGateway wires the gateway for cfg and stops it at the end of the test
// (or earlier through stop, to simulate a restart).
func startGateway(t *testing.T, cfg config.Config) *testGateway {
	t.Helper()
	return startGatewayWith(t, cfg, nil)
}

// startGatewayWith is startGateway with tracing tr (nil: off).
func startGatewayWith(t testing.TB, cfg config.Config, tr *tracing.Tracing) *testGateway {
	t.Helper()
	counter, err := sharedCounter()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if tr == nil {
		tr = tracing.Off()
	}
	// Wired as serve wires it: one Redis client (closed after the
	// gateway stops), the HTTP side first, with the prints the processes
	// share, then the memory core whose erasures reach them.
	rdb, err := openRedis(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if rdb != nil {
		t.Cleanup(func() { _ = rdb.Close() })
	}
	eng := engine.New(engine.Options{}, slog.New(slog.DiscardHandler))
	srv, err := newHTTP(cfg, eng, rdb, tr, prometheus.NewRegistry(), logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mem, err := openMemory(ctx, cfg, rdb, counter, srv.proxy, logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	eng.Use(mem.Core)
	hs := httptest.NewServer(srv.srv.Handler())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mem.RunWorkers(ctx, true, logger) })
	var once sync.Once
	g := &testGateway{URL: hs.URL, mem: mem}
	g.stop = func() {
		once.Do(func() {
			hs.Close()
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			mem.Capturer.Close(sctx)
			cancel()
			wg.Wait()
			mem.Close()
		})
	}
	t.Cleanup(g.stop)
	return g
}

// storeConfigs returns the configurations every memory test runs against:
// the embedded SQLite store, and PostgreSQL + Redis.
func storeConfigs(t *testing.T, up *upstreamtest.Server) map[string]func(t *testing.T) config.Config {
	base := func() config.Config {
		c := config.Default()
		c.Upstream.BaseURL = up.URL()
		// A key for the side models (summariser, fact extraction): without
		// one they are not called.
		c.Upstream.APIKey = "test-upstream-key"
		c.Upstream.Retries = 0
		// These tests check what memory holds, not how fast it loads: under
		// -race on a busy machine the default 150ms deadline would degrade
		// requests (forward them without memory) and hide what is checked.
		c.Memory.LoadTimeout = config.Duration(10 * time.Second)
		// Likewise the query's embedding: the built-in encoder under -race
		// takes longer than the default 300ms.
		c.Memory.EmbeddingTimeout = config.Duration(10 * time.Second)
		return c
	}
	return map[string]func(t *testing.T) config.Config{
		"sqlite": func(t *testing.T) config.Config {
			c := base()
			c.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
			return c
		},
		"postgres+redis": func(t *testing.T) config.Config {
			c := base()
			c.Store.Driver = "postgres"
			c.Store.PostgresURL = testenv.PostgresURL(t)
			c.Store.RedisURL = testenv.RedisURL(t)
			c.Store.RedisPrefix = testenv.RedisPrefix(t)
			return c
		},
	}
}

// unreachableRedisURL returns the URL of a Redis nothing listens on: a
// loopback port taken and released.
func unreachableRedisURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "redis://" + ln.Addr().String() + "/0"
}

type chatResult struct {
	Status int
	Header http.Header
	Body   []byte
}

// chat sends one chat completion with the given headers and messages.
func chat(t *testing.T, url string, headers map[string]string, stream bool, msgs ...map[string]any) chatResult {
	t.Helper()
	return sendChatBody(t, url, headers, map[string]any{"model": "gpt-4o-mini", "messages": msgs, "stream": stream})
}

// sendChatBody posts a chat completion body as given, with headers.
func sendChatBody(t *testing.T, url string, headers map[string]string, body map[string]any) chatResult {
	t.Helper()
	return sendBody(t, url+"/v1/chat/completions", headers, body)
}

// sendBody posts body as JSON to endpoint, with headers.
func sendBody(t *testing.T, endpoint string, headers map[string]string, body map[string]any) chatResult {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return chatResult{resp.StatusCode, resp.Header, b}
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }
func assistant(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": text}
}

// waitStored polls the store until the conversation holds n live messages.
func waitStored(t *testing.T, g *testGateway, id memory.Identity, n int) []memory.Message {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		msgs, err := g.mem.store.Recent(context.Background(), id, 1000)
		if err == nil && len(msgs) >= n {
			if len(msgs) > n {
				t.Fatalf("stored %d messages, want %d", len(msgs), n)
			}
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored %d messages after 15s, want %d (err %v)", len(msgs), n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastChat returns the newest chat completion the upstream received from a
// client request, skipping memgate's own background model calls (compaction
// and fact extraction ask for response_format json_object).
func lastChat(t *testing.T, up *upstreamtest.Server) upstreamtest.Request {
	t.Helper()
	reqs := up.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		if r.Path == "/v1/chat/completions" && !bytes.Contains(r.Body, []byte(`"response_format"`)) {
			return r
		}
	}
	t.Fatal("no chat completion reached the upstream")
	return upstreamtest.Request{}
}

// upstreamTexts returns the role:content lines of the last client chat
// request upstream, without memgate's memory block.
func upstreamTexts(t *testing.T, up *upstreamtest.Server) []string {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(lastChat(t, up).Body, &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range req.Messages {
		m, err := memory.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		if m.Role == "system" && strings.HasPrefix(m.Content, "<memory>") {
			continue
		}
		out = append(out, m.Role+": "+m.Content)
	}
	return out
}

// TestThreeTurnsRememberedAcrossRestart: a client that sends only its newest
// message gets the earlier exchanges prepended, in order, after the system
// prompt — also after the gateway restarts — on both stores.
func TestThreeTurnsRememberedAcrossRestart(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "alice", Conversation: "c1"}
			h := map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"}
			sys := map[string]any{"role": "system", "content": "You are terse."}

			g := startGateway(t, cfg)
			for i, text := range []string{"my name is Alice", "I live in Lisbon"} {
				r := chat(t, g.URL, h, i == 1, sys, user(text))
				if r.Status != 200 || r.Header.Get("X-Memory-Conversation") != "c1" {
					t.Fatalf("turn %d: status %d, conversation %q: %s", i, r.Status, r.Header.Get("X-Memory-Conversation"), r.Body)
				}
				waitStored(t, g, id, 2*(i+1))
			}
			g.stop() // restart

			g = startGateway(t, cfg)
			r := chat(t, g.URL, h, false, sys, user("where do I live?"))
			if r.Status != 200 || r.Header.Get("X-Memory-Degraded") != "" {
				t.Fatalf("status %d, degraded %q: %s", r.Status, r.Header.Get("X-Memory-Degraded"), r.Body)
			}
			want := []string{
				"system: You are terse.",
				"user: my name is Alice", "assistant: ack: my name is Alice",
				"user: I live in Lisbon", "assistant: ack: I live in Lisbon",
				"user: where do I live?",
			}
			if got := upstreamTexts(t, up); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("upstream messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			waitStored(t, g, id, 6)
		})
	}
}

// TestFullHistoryClientStoresEachTurnOnce: a client resending its whole
// history each turn ends with exactly 2N stored messages, and its requests go
// upstream unchanged.
func TestFullHistoryClientStoresEachTurnOnce(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "bob", Conversation: "full"}
			h := map[string]string{"X-Memory-User": "bob", "X-Memory-Conversation": "full"}
			var history []map[string]any
			const n = 5
			for i := range n {
				history = append(history, user(fmt.Sprintf("question %d", i)))
				r := chat(t, g.URL, h, i%2 == 0, history...)
				if r.Status != 200 {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				if got := len(upstreamTexts(t, up)); got != len(history) {
					t.Fatalf("turn %d: upstream got %d messages, client sent %d", i, got, len(history))
				}
				history = append(history, assistant(fmt.Sprintf("ack: question %d", i)))
				waitStored(t, g, id, 2*(i+1))
			}
			msgs := waitStored(t, g, id, 2*n)
			for i, m := range msgs {
				if m.Seq != int64(i+1) {
					t.Fatalf("seq %d at %d", m.Seq, i)
				}
			}
		})
	}
}

// TestStreamedToolCallStoredLikeNonStreamed: a streamed reply with tool calls
// is stored as one assistant message equal to the non-streamed equivalent.
func TestStreamedToolCallStoredLikeNonStreamed(t *testing.T) {
	reply := upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lisbon"}`},
		{ID: "call_2", Name: "get_time", Arguments: `{"tz":"Europe/Lisbon"}`},
	}}
	up := upstreamtest.New(t, upstreamtest.Chat(reply))
	g := startGateway(t, storeConfigs(t, up)["sqlite"](t))
	stored := map[bool]memory.Message{}
	for _, stream := range []bool{false, true} {
		conv := fmt.Sprintf("tools-%v", stream)
		r := chat(t, g.URL, map[string]string{"X-Memory-User": "carol", "X-Memory-Conversation": conv}, stream, user("weather and time?"))
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		msgs := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: "carol", Conversation: conv}, 2)
		stored[stream] = msgs[1]
	}
	var a, b any
	json.Unmarshal(stored[false].Raw, &a)
	json.Unmarshal(stored[true].Raw, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("streamed reply stored as\n%s\nnon-streamed as\n%s", jb, ja)
	}
	if !strings.Contains(string(ja), `"get_time"`) || !strings.Contains(string(ja), `{\"city\":\"Lisbon\"}`) {
		t.Fatalf("tool calls lost: %s", ja)
	}
}
