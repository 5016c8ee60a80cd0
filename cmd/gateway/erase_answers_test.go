package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// openTestMemory is openMemory over cfg, logging nowhere, closed when t
// ends; no worker runs.
func openTestMemory(t *testing.T, cfg config.Config) *memoryLayer {
	t.Helper()
	counter, err := sharedCounter()
	if err != nil {
		t.Fatal(err)
	}
	m, err := openMemory(context.Background(), cfg, nil, counter, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestErasureForgetsTheExtractionAnswers: the fact extraction model's
// answers the process keeps (recall's answers, per user and question) are
// what the user said, so the user's erasure drops them, as it drops the
// other caches' entries of the user: the same words said again after the
// erasure are asked of the model again, not answered from memory. Another
// user's answers stay.
func TestErasureForgetsTheExtractionAnswers(t *testing.T) {
	up, cfg := teaConfig(t, "sqlite")
	ctx := context.Background()
	m := openTestMemory(t, cfg)
	asked := func() int { return extractionsAsked(up) }
	say := func(user string) { t.Helper(); sayTea(t, m, user) }
	say("noor")
	say("omar")
	if n := asked(); n != 2 {
		t.Fatalf("the extraction model was asked %d times, want once per user", n)
	}
	if err := m.store.DeleteUser(ctx, memory.DefaultTenant, "noor"); err != nil {
		t.Fatal(err)
	}
	say("noor")
	if n := asked(); n != 3 {
		t.Errorf("after noor's erasure, her words said again were asked of the model %d times in all, want 3: "+
			"her earlier answer was kept in memory past her erasure", n)
	}
	say("omar")
	if n := asked(); n != 3 {
		t.Errorf("the model was asked %d times in all, want 3: noor's erasure dropped omar's answer", n)
	}
}

// teaConfig returns an upstream whose every answer is the fact extraction
// model's finding that the user drinks tea, and the configuration of the
// store named store (storeConfigs) over it, compaction off.
func teaConfig(t *testing.T, store string) (*upstreamtest.Server, config.Config) {
	t.Helper()
	const reply = `{"facts":[{"type":"preference","key":"drink","value":"tea","confidence":0.9}]}`
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: reply}))
	cfg := storeConfigs(t, up)[store](t)
	cfg.Compaction.Enabled = false
	return up, cfg
}

// extractionsAsked counts the fact extraction model's calls up received.
func extractionsAsked(up *upstreamtest.Server) int {
	n := 0
	for _, r := range up.Requests() {
		if bytes.Contains(r.Body, []byte("You extract durable facts")) {
			n++
		}
	}
	return n
}

// sayTea saves a turn of user's (conversation "c", the same words each
// time) through m and runs m's after-save hooks on it, as its enricher does.
func sayTea(t *testing.T, m *memoryLayer, user string) {
	t.Helper()
	ctx := context.Background()
	ex := memory.Exchange{ID: record.NewExchangeID(), Identity: memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"},
		At: time.Now().UTC(), Turn: []memory.Message{{Role: "user", Content: "I drink tea every morning."}},
		Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	res, err := m.store.SaveExchange(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range m.hooks {
		if err := h.AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res}); err != nil {
			t.Fatal(err)
		}
	}
}
