package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// brokenSecret is what the upstream streams before it breaks off; nothing
// memgate derives (facts, summaries, recalled passages, prompts) may carry it.
const brokenSecret = "4417"

// leakUpstream streams "The vault code is 4417" and then an error event to
// a chat request asking about the vault; answers other chat requests with
// "ack: <last user text>"; and answers the side models' JSON requests
// (summaries, fact extraction) by echoing what they were given, so anything
// fed to them shows up in what memgate stores. It records the side models'
// request bodies.
type leakUpstream struct {
	mu   sync.Mutex
	side []string
}

func (u *leakUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Messages       []json.RawMessage `json:"messages"`
		Stream         bool              `json:"stream"`
		ResponseFormat *struct {
			Type string `json:"type"`
		} `json:"response_format"`
	}
	json.Unmarshal(body, &req)
	var texts []string
	last := ""
	for _, raw := range req.Messages {
		if m, err := memory.ParseMessage(raw); err == nil {
			texts = append(texts, m.Content)
			if m.Role == "user" {
				last = m.Content
			}
		}
	}
	if req.ResponseFormat != nil {
		u.mu.Lock()
		u.side = append(u.side, string(body))
		u.mu.Unlock()
		echo := strings.Join(texts[1:], " | ")
		if len(echo) > 250 {
			echo = echo[len(echo)-250:]
		}
		var reply any
		if bytes.Contains(body, []byte(extractionMarker)) {
			reply = map[string]any{"facts": []map[string]any{{"type": "profile", "key": "said", "value": echo, "confidence": 0.9}}}
		} else {
			reply = map[string]any{"summary": "Summary of the chat: " + echo, "key_events": []string{echo},
				"preserved": map[string]any{"numbers": []string{}, "dates": []string{}, "decisions": []string{}}}
		}
		out, _ := json.Marshal(reply)
		upstreamtest.Chat(upstreamtest.Reply{Content: string(out)}).ServeHTTP(w, r)
		return
	}
	if req.Stream && strings.Contains(last, "vault") {
		upstreamtest.SSE(
			`{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"The vault code is `+brokenSecret+`"}}]}`,
			`{"error":{"message":"overloaded","type":"server_error"}}`,
		).ServeHTTP(w, r)
		return
	}
	upstreamtest.Chat(upstreamtest.Reply{Content: "ack: " + last}).ServeHTTP(w, r)
}

func (u *leakUpstream) sideRequests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.side...)
}

// TestFailedReplyNeverFeedsMemory: a stream that breaks off mid-reply is
// stored marked failed; then enrichment runs (fact extraction, compaction,
// recall indexing) over the conversation, through the real gateway wiring
// on both stores. No side-model call is given the broken-off text, and no
// fact, summary or recalled passage carries it; the turns around it are
// still summarised and recalled.
func TestFailedReplyNeverFeedsMemory(t *testing.T) {
	lu := &leakUpstream{}
	up := upstreamtest.New(t, lu)
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			cfg.Compaction.MaxMessages = 4
			cfg.Compaction.KeepMessages = 2
			g := startGateway(t, cfg)
			user := "vera-" + strings.ReplaceAll(name, "+", "-")
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c1"}
			h := map[string]string{"X-Memory-User": user, "X-Memory-Conversation": "c1"}
			turns := []string{"I live in Porto.", "What is the vault code?", "I work as a baker.", "I have a cat named Miso.", "I like green tea."}
			for i, text := range turns {
				r := chat(t, g.URL, h, i == 1, map[string]any{"role": "user", "content": text})
				if r.Status != 200 {
					t.Fatalf("turn %d: status %d: %s", i, r.Status, r.Body)
				}
				waitStored(t, g, id, 2*(i+1))
			}
			msgs := waitStored(t, g, id, 2*len(turns))
			if !msgs[3].Failed() || !strings.Contains(msgs[3].Content, brokenSecret) {
				t.Fatalf("the broken-off reply is stored as %q (failed %v), want it kept marked failed", msgs[3].Content, msgs[3].Failed())
			}
			ks := g.mem.store.(interface {
				LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
				Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
			})
			var sum memory.Summary
			eventually(t, "a summary and facts of every turn", func() bool {
				s, err := ks.LatestSummary(context.Background(), id)
				if err != nil {
					return false
				}
				sum = s
				fs, _ := ks.Facts(context.Background(), memory.DefaultTenant, user, time.Now(), true)
				return strings.Contains(fmt.Sprint(fs), "green tea") && s.ToSeq >= 6
			})
			if !strings.Contains(sum.Text, "Porto") || strings.Contains(sum.Text+strings.Join(sum.KeyEvents, " "), brokenSecret) {
				t.Fatalf("summary %q: want the turns around the broken-off reply and nothing of it", sum.Text)
			}
			fs, err := ks.Facts(context.Background(), memory.DefaultTenant, user, time.Now(), true)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if strings.Contains(f.Value, brokenSecret) {
					t.Fatalf("fact %+v derived from the broken-off reply", f)
				}
			}
			for _, b := range lu.sideRequests() {
				if strings.Contains(b, brokenSecret) {
					t.Fatalf("a side-model call was given the broken-off reply: %s", b)
				}
			}
			// Recall, from another conversation: the question is found, and
			// its passage holds nothing of the reply that broke off.
			var items []memory.Item
			eventually(t, "recall to find the question", func() bool {
				rec, err := g.mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{
					Identity: memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c2"},
					Text:     "what was the vault code", CrossConversation: true, Now: time.Now(),
				})
				items = rec.Items
				return err == nil && strings.Contains(fmt.Sprint(items), "vault")
			})
			for _, it := range items {
				if strings.Contains(it.Text, brokenSecret) {
					t.Fatalf("recalled passage %q carries the broken-off reply", it.Text)
				}
			}
			// And a later turn's prompt never carries it.
			chat(t, g.URL, map[string]string{"X-Memory-User": user, "X-Memory-Conversation": "c2"}, false,
				map[string]any{"role": "user", "content": "Remind me: what was the vault code?"})
			if p := strings.Join(upstreamTexts(t, up), "\n"); strings.Contains(p, brokenSecret) {
				t.Fatalf("a later prompt carries the broken-off reply:\n%s", p)
			}
		})
	}
}
