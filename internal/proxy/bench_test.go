package proxy

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
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

func benchServer(tb testing.TB, stream bool) http.Handler {
	tb.Helper()
	cfg := config.Default()
	cfg.Upstream.BaseURL = benchUpstream(tb, stream)
	s, err := New(cfg, Deps{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.up.closeIdle)
	return s.Handler()
}

func benchmarkChat(b *testing.B, stream bool) {
	h := benchServer(b, stream)
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
func BenchmarkChatPassthrough(b *testing.B) { benchmarkChat(b, false) }

// BenchmarkChatStream is BenchmarkChatPassthrough for a streamed answer.
func BenchmarkChatStream(b *testing.B) { benchmarkChat(b, true) }

// BenchmarkParseChat measures the memory-on path: reading the fields the
// proxy needs and decoding every message with memory.ParseMessage.
func BenchmarkParseChat(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		cb, err := parseChat(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := parseMessages(cb.messages); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckChat measures the memory-off path: reading the fields the
// proxy needs and checking the messages without decoding them.
func BenchmarkCheckChat(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		cb, err := parseChat(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkMessages(cb.messages); err != nil {
			b.Fatal(err)
		}
	}
}

// rawUpstream answers every request on a connection with the same
// completion, parsing only what framing needs, so a benchmark of the served
// path spends its time in the gateway.
func rawUpstream(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	completion := upstreamtest.Completion("gpt-4o-mini", upstreamtest.DefaultReply)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(completion)) + "\r\n\r\n" + string(completion))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for readRawMessage(br) == nil {
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1"
}

// readRawMessage reads one HTTP/1.1 message with a Content-Length body (or
// none) and discards it.
func readRawMessage(br *bufio.Reader) error {
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	_, err := br.Discard(n)
	return err
}

// BenchmarkServedChat is one memory-off chat completion at a time through
// the real server — connection handling, routing, the handler, the upstream
// client — over loopback, with a raw client and upstream that parse only
// framing. Its allocations are the gateway's (the raw ends allocate none).
func BenchmarkServedChat(b *testing.B) {
	cfg := config.Default()
	cfg.Upstream.BaseURL = rawUpstream(b)
	s, err := New(cfg, Deps{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	url, _ := mustRun(b, s)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: memgate\r\nContent-Type: application/json\r\n" +
		"Authorization: Bearer sk-bench\r\nX-Memory-Mode: off\r\nContent-Length: " + strconv.Itoa(len(benchBody)) + "\r\n\r\n" + benchBody)
	br := bufio.NewReader(c)
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := readRawMessage(br); err != nil {
			b.Fatal(err)
		}
	}
}
