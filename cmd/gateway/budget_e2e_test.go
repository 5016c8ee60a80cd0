package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

const (
	testBudget = 1500
	goal       = "I want to save R$ 5.000 by June."
)

// budgetStores returns the store settings the budget tests run against.
func budgetStores() map[string]func(t *testing.T, c *config.Config) {
	return map[string]func(t *testing.T, c *config.Config){
		"sqlite": func(t *testing.T, c *config.Config) {
			c.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
		},
		"postgres+redis": func(t *testing.T, c *config.Config) {
			c.Store.Driver = "postgres"
			c.Store.PostgresURL = testenv.PostgresURL(t)
			c.Store.RedisURL = testenv.RedisURL(t)
			c.Store.RedisPrefix = testenv.RedisPrefix(t)
		},
	}
}

// turnText is the user's message at turn i (from 1): short chatter, and the
// savings goal at turn 3.
func turnText(i int) string {
	if i == 3 {
		return goal
	}
	return fmt.Sprintf("Turn %d: tell me one more thing about topic number %d please.", i, i*7)
}

// checkWithinBudget asserts that the newest upstream prompt costs what
// X-Memory-Tokens-Sent says and no more than the budget.
func checkWithinBudget(t *testing.T, up *summariserUpstream, res chatResult, budget int) []json.RawMessage {
	t.Helper()
	if res.Status != http.StatusOK {
		t.Fatalf("status %d: %s", res.Status, res.Body)
	}
	if res.Header.Get("X-Memory-Degraded") != "" || res.Header.Get("X-Memory-Over-Budget") != "" {
		t.Fatalf("degraded %q over budget %q", res.Header.Get("X-Memory-Degraded"), res.Header.Get("X-Memory-Over-Budget"))
	}
	prompts := up.chatPrompts()
	last := prompts[len(prompts)-1]
	counter, _ := sharedCounter()
	n := counter.Messages("gpt-4o-mini", last)
	if sent, _ := strconv.Atoi(res.Header.Get("X-Memory-Tokens-Sent")); sent != n {
		t.Fatalf("X-Memory-Tokens-Sent = %d, the upstream prompt costs %d", sent, n)
	}
	if n > budget {
		t.Fatalf("upstream prompt costs %d tokens, budget %d:\n%s", n, budget, promptText(t, last))
	}
	return last
}

func latestSummary(t *testing.T, g *budgetGateway, id memory.Identity) (memory.Summary, bool) {
	t.Helper()
	s, err := g.mem.store.LatestSummary(context.Background(), id)
	if errors.Is(err, memory.ErrNotFound) {
		return s, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

// TestBudget300Turns drives a 300-turn conversation from a client that sends
// only its newest message: every upstream prompt stays within the budget,
// summaries are created, and the goal stated at turn 3 is still in front of
// the model at turn 300.
//
// The 300 turns run on PostgreSQL + Redis; on SQLite (whose pure-Go engine
// is slow under -race) 120 turns, still dozens of compactions.
func TestBudget300Turns(t *testing.T) {
	turns := map[string]int{"postgres+redis": 300, "sqlite": 120}
	for name, store := range budgetStores() {
		t.Run(name, func(t *testing.T) {
			n := turns[name]
			up := &summariserUpstream{}
			srv := upstreamtest.New(t, up)
			cfg := budgetConfig(t, srv.URL(), testBudget)
			store(t, &cfg)
			g := startBudgetGateway(t, cfg)
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "alice", Conversation: "long"}
			hdr := map[string]string{"X-Memory-User": id.User, "X-Memory-Conversation": id.Conversation}
			sys := map[string]any{"role": "system", "content": "You are a frugal finance coach."}
			var last []json.RawMessage
			var res chatResult
			for i := 1; i <= n; i++ {
				res = chat(t, g.URL, hdr, false, sys, user(turnText(i)))
				last = checkWithinBudget(t, up, res, testBudget)
				g.waitHooked(t, int64(i))
			}
			text := promptText(t, last)
			if !strings.Contains(text, "R$ 5.000 by June") {
				t.Fatalf("the goal of turn 3 is not in the prompt at turn %d:\n%s", n, text)
			}
			if !strings.HasPrefix(text, "system: You are a frugal finance coach.\nsystem: <memory>") {
				t.Fatalf("system prompt then memory block expected first:\n%s", text)
			}
			if !strings.HasSuffix(text, "user: "+turnText(n)+"\n") {
				t.Fatalf("the current turn is not last:\n%s", text)
			}
			s, ok := latestSummary(t, g, id)
			if !ok || s.Version < 5 || !strings.HasPrefix(s.Text, "MODEL SUMMARY:") {
				t.Fatalf("summary %+v, want several model-written versions", s)
			}
			// A model-written version is shown: the latest, or (with
			// memory.hold_summary) the one an earlier turn showed, while
			// the turns after it fit.
			if !strings.Contains(text, "Summary of the earlier conversation:\n MODEL SUMMARY:") {
				t.Fatalf("no model-written summary in the prompt:\n%s", text)
			}
			orig, _ := strconv.Atoi(res.Header.Get("X-Memory-Tokens-Original"))
			sent, _ := strconv.Atoi(res.Header.Get("X-Memory-Tokens-Sent"))
			if orig < 5*sent {
				t.Fatalf("tokens original %d, sent %d: %d turns should cost far more than what was sent", orig, sent, n)
			}
		})
	}
}

// TestBudgetSummariserDown: while the summariser fails, requests still
// succeed within the budget; summaries appear once it recovers, or — after
// compaction.fallback_after failures — from the extractive fallback.
func TestBudgetSummariserDown(t *testing.T) {
	tests := []struct {
		name          string
		fallbackAfter int
		recover       bool
		wantPrefix    string
	}{
		{"retried until it recovers", 1000, true, "MODEL SUMMARY:"},
		{"extractive fallback", 2, false, "User: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &summariserUpstream{}
			up.down.Store(true)
			srv := upstreamtest.New(t, up)
			cfg := budgetConfig(t, srv.URL(), testBudget)
			cfg.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
			cfg.Compaction.FallbackAfter = tt.fallbackAfter
			g := startBudgetGateway(t, cfg)
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "bob", Conversation: "down"}
			hdr := map[string]string{"X-Memory-User": id.User, "X-Memory-Conversation": id.Conversation}
			turn := 0
			send := func(n int) {
				for range n {
					turn++
					checkWithinBudget(t, up, chat(t, g.URL, hdr, false, user(turnText(turn))), testBudget)
					g.waitHooked(t, int64(turn))
				}
			}
			send(40)
			up.mu.Lock()
			failed := up.failed
			up.mu.Unlock()
			if failed == 0 {
				t.Fatal("the summariser was never asked")
			}
			if tt.recover {
				if _, ok := latestSummary(t, g, id); ok {
					t.Fatal("a summary was stored while the summariser was down")
				}
				up.down.Store(false)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				send(1)
				if s, ok := latestSummary(t, g, id); ok {
					if !strings.HasPrefix(s.Text, tt.wantPrefix) {
						t.Fatalf("summary %q, want it to start with %q", s.Text, tt.wantPrefix)
					}
					if !strings.Contains(s.Text, "5.000") {
						t.Fatalf("summary lost the goal: %q", s.Text)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no summary 20s after the summariser recovered or the fallback was due")
				}
			}
			send(5)
		})
	}
}

// TestBudgetFullHistoryClient: a client that resends its whole history
// keeps the newest of it that fits, and the stored summary stands in for
// the overflow.
func TestBudgetFullHistoryClient(t *testing.T) {
	for name, store := range budgetStores() {
		t.Run(name, func(t *testing.T) {
			up := &summariserUpstream{}
			srv := upstreamtest.New(t, up)
			cfg := budgetConfig(t, srv.URL(), testBudget)
			store(t, &cfg)
			g := startBudgetGateway(t, cfg)
			hdr := map[string]string{"X-Memory-User": "carol", "X-Memory-Conversation": "full"}
			history := []map[string]any{{"role": "system", "content": "You are a frugal finance coach."}}
			var last []json.RawMessage
			const turns = 50
			for i := 1; i <= turns; i++ {
				history = append(history, user(turnText(i)))
				res := chat(t, g.URL, hdr, false, history...)
				last = checkWithinBudget(t, up, res, testBudget)
				var reply struct {
					Choices []struct {
						Message map[string]any `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(res.Body, &reply); err != nil || len(reply.Choices) == 0 {
					t.Fatalf("reply %s: %v", res.Body, err)
				}
				history = append(history, map[string]any{"role": "assistant", "content": reply.Choices[0].Message["content"]})
				g.waitHooked(t, int64(i))
			}
			text := promptText(t, last)
			for _, want := range []string{"system: You are a frugal finance coach.\nsystem: <memory>", "Summary of the earlier conversation:", "R$ 5.000 by June"} {
				if !strings.Contains(text, want) {
					t.Fatalf("prompt lacks %q:\n%s", want, text)
				}
			}
			if strings.Contains(text, "user: "+turnText(1)+"\n") {
				t.Fatalf("the oldest turn was kept verbatim past the budget:\n%s", text)
			}
			if !strings.HasSuffix(text, "user: "+turnText(turns)+"\n") {
				t.Fatalf("the current turn is not last:\n%s", text)
			}
		})
	}
}

// TestBudgetPreviewEqualsUpstream: POST /v1/memory/preview answers exactly
// the messages the next chat completion sends upstream, with a per-part
// accounting that adds up.
func TestBudgetPreviewEqualsUpstream(t *testing.T) {
	for name, store := range budgetStores() {
		t.Run(name, func(t *testing.T) {
			up := &summariserUpstream{}
			srv := upstreamtest.New(t, up)
			cfg := budgetConfig(t, srv.URL(), testBudget)
			store(t, &cfg)
			g := startBudgetGateway(t, cfg)
			hdr := map[string]string{"X-Memory-User": "dan", "X-Memory-Conversation": "preview", "X-Memory-Budget": "1200"}
			for i := 1; i <= 40; i++ {
				checkWithinBudget(t, up, chat(t, g.URL, hdr, false, user(turnText(i))), 1200)
				g.waitHooked(t, int64(i))
			}
			next := user("What was my savings goal again?")
			body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []any{next}})
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/memory/preview", bytes.NewReader(body))
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			pb, _ := io.ReadAll(resp.Body)
			var pv struct {
				Messages   []json.RawMessage `json:"messages"`
				TokensSent int               `json:"tokens_sent"`
				Budget     int               `json:"budget"`
				Parts      map[string]int    `json:"parts"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(pb, &pv) != nil {
				t.Fatalf("preview %d: %s", resp.StatusCode, pb)
			}
			res := chat(t, g.URL, hdr, false, next)
			sent := checkWithinBudget(t, up, res, 1200)
			if got, want := canonical(t, pv.Messages), canonical(t, sent); got != want {
				t.Fatalf("preview differs from what was sent upstream:\npreview  %s\nupstream %s", got, want)
			}
			if h, _ := strconv.Atoi(res.Header.Get("X-Memory-Tokens-Sent")); pv.TokensSent != h {
				t.Fatalf("preview tokens_sent %d, chat sent %d", pv.TokensSent, h)
			}
			const replyPriming = 3
			ps := pv.Parts
			if sum := ps["system"] + ps["memory"] + ps["recent"] + ps["current"] + replyPriming; sum != pv.TokensSent || pv.Budget != 1200 {
				t.Fatalf("parts %v add up to %d, tokens_sent %d, budget %d", ps, sum, pv.TokensSent, pv.Budget)
			}
			if ps["summary"] == 0 || ps["pinned"] == 0 || ps["recent"] == 0 {
				t.Fatalf("parts %v: want a summary, pinned facts and recent turns", ps)
			}
			if v := metricValue(t, g.URL, "memgate_memory_tokens_saved_total"); v == "" || v == "0" {
				t.Fatalf("memgate_memory_tokens_saved_total = %q", v)
			}
		})
	}
}

// canonical re-encodes a message list for comparison (key order and
// escaping normalised).
func canonical(t *testing.T, msgs []json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	for _, m := range msgs {
		var v any
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(v)
		b.Write(out)
		b.WriteByte('\n')
	}
	return b.String()
}
