package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// budgetGateway is the gateway wired as wire.go is meant to wire issue 4:
// the budgeted assembler as Preparer and the compactor as an after-save hook
// of the capture worker. hooked counts exchanges whose hooks all ran.
type budgetGateway struct {
	*testGateway
	hooked atomic.Int64
}

// startBudgetGateway wires the gateway for cfg with newAssembler and
// newCompactor and stops it at the end of the test.
func startBudgetGateway(t *testing.T, cfg config.Config) *budgetGateway {
	t.Helper()
	counter, err := sharedCounter()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	bk, err := openStore(ctx, cfg, nil, logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	st, q := bk.store, bk.queue
	g := &budgetGateway{}
	mem := &memoryLayer{Core: &engine.Core{Store: st, Close: bk.close}, store: st, queue: q}
	hooks := []record.Hook{}
	if cfg.Compaction.Enabled {
		hooks = append(hooks, newCompactor(cfg, st, counter, nil, logger))
	}
	hooks = append(hooks, record.EachExchange(func(context.Context, memory.Exchange, memory.SaveResult) error {
		g.hooked.Add(1)
		return nil
	}))
	saver := record.WithHooks(st, hooks...)
	mem.Capturer = record.New(q, saver, nil, logger, record.Options{RetryBase: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if q == nil {
		t.Fatal("the budget tests need a capture queue")
	}
	mem.Worker = record.NewWorker(q, saver, logger, record.WorkerOptions{
		StaleAfter: cfg.Capture.ReclaimAfter.D(), Block: 50 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	})
	if mem.Prompt, err = newAssembler(cfg, withReads(cfg, st, nil), nil, nil, counter, logger); err != nil {
		t.Fatal(err)
	}
	srv, err := newTestHTTP(cfg, mem.Core, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.srv.Handler())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); mem.Worker.Run(ctx) }()
	var once sync.Once
	g.testGateway = &testGateway{URL: hs.URL, mem: mem}
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

// waitHooked polls until the hooks ran for n exchanges (a hook chain that
// failed is retried by the worker and counted when the later hooks run).
func (g *budgetGateway) waitHooked(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.hooked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("hooks ran for %d exchanges after 20s, want %d", g.hooked.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// summariserUpstream is a fake upstream that doubles as the summariser: a
// request asking for a JSON object (the compaction call) is answered with a
// valid summary built from its input — or 500 while down — and every other
// chat completion with "ack: <last user text>". It records the message
// lists of the chat completions.
type summariserUpstream struct {
	down atomic.Bool

	mu         sync.Mutex
	prompts    [][]json.RawMessage
	summarised int
	failed     int
}

var summaryLimit = regexp.MustCompile(`under (\d+) tokens`)

func (s *summariserUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages       []json.RawMessage `json:"messages"`
		ResponseFormat *struct {
			Type string `json:"type"`
		} `json:"response_format"`
	}
	json.Unmarshal(body, &req)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down.Load() {
			s.failed++
			upstreamtest.Error(http.StatusInternalServerError, "server_error", "", "summariser down").ServeHTTP(w, r)
			return
		}
		s.summarised++
		upstreamtest.Chat(upstreamtest.Reply{Content: fakeSummary(req.Messages)}).ServeHTTP(w, r)
		return
	}
	last := ""
	for _, raw := range req.Messages {
		if m, err := memory.ParseMessage(raw); err == nil && m.Role == "user" {
			last = m.Content
		}
	}
	s.mu.Lock()
	s.prompts = append(s.prompts, req.Messages)
	s.mu.Unlock()
	upstreamtest.Chat(upstreamtest.Reply{Content: "ack: " + last}).ServeHTTP(w, r)
}

// fakeSummary answers a compaction prompt: "MODEL SUMMARY:" then the
// previous summary's lines and the new messages that carry a digit, newest
// kept, within the word limit the prompt states.
func fakeSummary(msgs []json.RawMessage) string {
	var prompt string
	if len(msgs) > 1 {
		m, _ := memory.ParseMessage(msgs[1])
		prompt = m.Content
	}
	limit := 100
	if m := summaryLimit.FindStringSubmatch(prompt); m != nil {
		fmt.Sscan(m[1], &limit)
	}
	var lines, money []string
	for _, l := range strings.Split(prompt, "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "MODEL SUMMARY: ")
		switch {
		case l == "" || strings.HasPrefix(l, "Previous summary") || strings.HasPrefix(l, "New messages") || strings.HasPrefix(l, "Keep the summary"):
		case strings.Contains(l, "R$"):
			if i := strings.Index(l, "user: "); i >= 0 {
				l = l[i:]
			}
			if j := strings.Index(l, " ; "); j >= 0 {
				l = l[:j]
			}
			money = append(money, l)
		case strings.ContainsAny(l, "0123456789"):
			lines = append(lines, l)
		}
	}
	// Amounts first, then the newest other specifics, within half the limit
	// in words.
	words := strings.Fields(strings.Join(money, " ; "))
	rest := strings.Fields(strings.Join(lines, " ; "))
	if room := limit/2 - len(words); len(rest) > room {
		rest = rest[len(rest)-max(room, 0):]
	}
	words = append(words, rest...)
	out, _ := json.Marshal(map[string]any{
		"summary":    "MODEL SUMMARY: " + strings.Join(words, " "),
		"key_events": []string{fmt.Sprintf("%d lines folded", len(lines))},
		"preserved":  map[string]any{"numbers": []string{}, "dates": []string{}, "decisions": []string{}},
	})
	return string(out)
}

// chatPrompts returns the recorded chat prompts.
func (s *summariserUpstream) chatPrompts() [][]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]json.RawMessage(nil), s.prompts...)
}

// budgetConfig is a small-budget configuration so compaction runs often.
func budgetConfig(t *testing.T, upURL string, budget int) config.Config {
	t.Helper()
	c := config.Default()
	c.Upstream.BaseURL = upURL
	// A key for the side models (the summariser): without one they are
	// not called.
	c.Upstream.APIKey = "test-upstream-key"
	c.Upstream.Retries = 0
	c.Upstream.Breaker.OpenTimeout = config.Duration(100 * time.Millisecond)
	c.Memory.MaxContextTokens = budget
	c.Memory.LoadTimeout = config.Duration(5 * time.Second)
	c.Capture.ReclaimAfter = config.Duration(100 * time.Millisecond)
	c.Recall.Enabled = false
	c.Recall.Extraction.Enabled = false
	return c
}

// prompt joins a message list's role: content lines.
func promptText(t *testing.T, msgs []json.RawMessage) string {
	t.Helper()
	var b strings.Builder
	for _, raw := range msgs {
		m, err := memory.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
	}
	return b.String()
}
