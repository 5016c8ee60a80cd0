package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
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
	deadline := time.Now().Add(15 * time.Second)
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
