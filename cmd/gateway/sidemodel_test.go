package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/proxy/upstream"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestSideModelsWithoutKeyAreNotCalled: with client pass-through auth and no
// side-model key, memgate warns once at start-up and never calls the
// summariser or fact extraction (which would go out unauthenticated and fail
// 401 on every exchange); summaries are extractive, pattern facts kept.
func TestSideModelsWithoutKeyAreNotCalled(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["sqlite"](t)
	cfg.Upstream.APIKey = ""
	cfg.Compaction.MaxMessages, cfg.Compaction.KeepMessages = 4, 2
	if w := cfg.Warnings(); len(w) != 2 {
		t.Fatalf("start-up warnings = %q, want one per side model", w)
	}
	g := startGateway(t, cfg)
	h := map[string]string{"X-Memory-User": "noor", "X-Memory-Conversation": "c"}
	for i := range 4 {
		if r := chat(t, g.URL, h, false, user(fmt.Sprintf("My name is Noor and this is message %d.", i))); r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
	}
	id := memory.Identity{Tenant: memory.DefaultTenant, User: "noor", Conversation: "c"}
	waitStored(t, g, id, 8)
	// The after-save hooks ran: compaction left an (extractive) summary.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := g.mem.store.LatestSummary(context.Background(), id); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no summary: compaction did not run")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range up.Requests() {
		if bytes.Contains(r.Body, []byte(`"response_format"`)) {
			t.Fatalf("a side model was called without a key: %s", r.Body)
		}
	}
}

// TestSideModelReplyBounded: a side model (summariser, fact extraction)
// that answers with a body far larger than any summary or list of facts —
// a hostile or broken upstream, endless — fails the call once the
// client has read upstream.MaxSideReplyBytes of it, instead of holding the
// whole body in memory; a reply within the bound is read as usual.
func TestSideModelReplyBounded(t *testing.T) {
	const pre = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`
	const post = `"},"finish_reason":"stop"}]}`
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The reply's size is the path's first segment.
		size, _ := strconv.Atoi(strings.Split(r.URL.Path, "/")[1])
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, pre)
		chunk := strings.Repeat("a", 64<<10)
		for left := size; left > 0; left -= len(chunk) {
			n, err := io.WriteString(w, chunk[:min(left, len(chunk))])
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		io.WriteString(w, post)
	}))
	t.Cleanup(srv.Close)
	cfg := config.Default()
	for _, tt := range []struct {
		size int
		ok   bool
	}{{1 << 10, true}, {upstream.MaxSideReplyBytes / 2, true}, {64 * upstream.MaxSideReplyBytes, false}} {
		sent.Store(0)
		c := sideModel(srv.URL+"/"+strconv.Itoa(tt.size), "key", cfg.Upstream, time.Minute)
		resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "m",
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "summarise"}}})
		switch {
		case tt.ok && (err != nil || len(resp.Choices) != 1 || len(resp.Choices[0].Message.Content) != tt.size):
			t.Errorf("a %d-byte reply: %v", tt.size, err)
		case !tt.ok && err == nil:
			t.Errorf("a %d-byte reply was read whole (%d bytes sent)", tt.size, sent.Load())
		}
	}
}
