package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// TestConversationDeleteReachesTheBackfill: a first request resending a
// long history has its older messages stored without a vector, waiting in
// the process for the idle backfill to embed them; deleting the
// conversation drops them there too (the store's delete goes through the
// engine's caches, whose forgetters include them), so the backfill sends
// none of the deleted text to the embedder afterwards.
func TestConversationDeleteReachesTheBackfill(t *testing.T) {
	_, cfg := teaConfig(t, "sqlite")
	cfg.Recall.Extraction.Enabled = false
	ctx := context.Background()
	m := openTestMemory(t, cfg)
	id := memory.Identity{Tenant: memory.DefaultTenant, User: "noor", Conversation: "c"}
	prior := make([]memory.Message, 800)
	for i := range prior {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		prior[i] = memory.Message{Role: role, Content: fmt.Sprintf("Message %d: we planned the garden party and lantern%d.", i, i)}
	}
	ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: time.Now().UTC(), Prior: prior,
		Turn:  []memory.Message{{Role: "user", Content: "And the music?"}},
		Reply: memory.Message{Role: "assistant", Content: "A string quartet."}}
	res, err := m.store.SaveExchange(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	res.GuardSince = ex.At
	for _, h := range m.hooks {
		if err := h.AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res}); err != nil {
			t.Fatal(err)
		}
	}
	m.embeddings.Clear()
	if err := m.store.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	backfill := m.recall.Backfill()
	for range 1000 {
		n, err := backfill(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	held := 0
	m.embeddings.Drop(func(k recall.EmbeddingKey) bool { held++; return false })
	if held > 0 {
		t.Fatalf("%d texts of the deleted conversation embedded by the backfill after its deletion", held)
	}
}
