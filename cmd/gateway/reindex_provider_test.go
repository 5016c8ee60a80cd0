package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/encoder"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestSwitchToTheEncoderThenReindex: memory indexed by the local embedder
// (384 dimensions) is still recalled, by full text, once the provider
// becomes the built-in encoder (512 dimensions) and before any reindex;
// `gateway reindex` then gives every item an encoder vector, which the
// vector search then finds, and a rerun finds nothing left.
func TestSwitchToTheEncoderThenReindex(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Default())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cfg := mk(t)
			cfg.Recall.Extraction.Enabled = false
			id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
			other := memory.Identity{Tenant: "t", User: "u", Conversation: "other"}
			const paraphrase = "Who joined me for dinner?"

			cfg.Recall.Embeddings.Provider = "local"
			mem := mustOpenMemory(t, cfg)
			ex := memory.Exchange{ID: "ex-switch", Identity: id, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: "I grabbed a bite with my sister after work at the Biscuit Cafe."}},
				Reply: memory.Message{Role: "assistant", Content: "Sounds like a lovely evening."}}
			saveIndexed(t, ctx, mem, ex)
			mem.Close()

			cfg.Recall.Embeddings.Provider = "encoder"
			mem = mustOpenMemory(t, cfg)
			pending := mustItemsToEmbed(t, mem.store)
			if pending == 0 {
				t.Fatal("no item awaits an encoder vector after the switch")
			}
			if !recalls(t, mem, other, "Biscuit Cafe", "Biscuit") {
				t.Fatal("before reindex: full text no longer finds the local embedder's items")
			}
			if n := vectorHits(t, mem, paraphrase); n != 0 {
				t.Fatalf("before reindex: the encoder's vector search finds %d items", n)
			}
			mem.Close()

			out := reindexWith(t, cfg)
			if !strings.Contains(out, fmt.Sprintf("reindexed %d items in", pending)) || !strings.Contains(out, "512 dimensions") {
				t.Fatalf("reindex after the switch to the encoder (%d pending): %q", pending, out)
			}
			mem = mustOpenMemory(t, cfg)
			if n := mustItemsToEmbed(t, mem.store); n != 0 {
				t.Fatalf("%d items still without an encoder vector after reindex", n)
			}
			if n := vectorHits(t, mem, paraphrase); n == 0 {
				t.Fatal("after reindex: the encoder's vector search finds nothing")
			}
			mem.Close()
			if out := reindexWith(t, cfg); !strings.Contains(out, "reindexed 0 items") {
				t.Fatalf("rerun: %q", out)
			}
		})
	}
}

// mustOpenMemory wires memory for cfg; the caller closes it.
func mustOpenMemory(t *testing.T, cfg config.Config) *memoryLayer {
	t.Helper()
	counter, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := openMemory(context.Background(), cfg, nil, counter, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if mem.recall == nil {
		t.Fatal("recall is off")
	}
	return mem
}

// mustItemsToEmbed counts the items without a vector of the encoder's.
func mustItemsToEmbed(t *testing.T, st store) int {
	t.Helper()
	items, err := st.ItemsToEmbed(context.Background(), encoder.ModelName, config.EncoderDims, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(items)
}

// recalls reports whether recalling q for id brings a passage containing
// want.
func recalls(t *testing.T, mem *memoryLayer, id memory.Identity, q, want string) bool {
	t.Helper()
	got, err := mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{Identity: id, Text: q, CrossConversation: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range got.Items {
		if strings.Contains(it.Text, want) {
			return true
		}
	}
	return false
}

// vectorHits counts the items the vector search alone finds for q, embedded
// by mem's embedder.
func vectorHits(t *testing.T, mem *memoryLayer, q string) int {
	t.Helper()
	ctx := context.Background()
	emb := mem.recall.Embedder
	vecs, err := emb.Embed(ctx, []string{q}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	items, err := mem.store.SearchVector(ctx, memory.ItemQuery{Tenant: "t", User: "u", Embedding: vecs[0], Model: emb.Model(), Dims: emb.Dims(), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return len(items)
}

// reindexWith runs `gateway reindex` on cfg's store with cfg's provider
// (a config file for the store, the provider from the environment) and
// returns what it printed.
func reindexWith(t *testing.T, cfg config.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf("store:\n  driver: %s\n  sqlite_path: %q\n  postgres_url: %q\n  redis_url: %q\n  redis_prefix: %q\n",
		cfg.Store.Driver, cfg.Store.SQLitePath, cfg.Store.PostgresURL, cfg.Store.RedisURL, cfg.Store.RedisPrefix)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := env(map[string]string{"GATEWAY_CONFIG": path, "GATEWAY_EMBEDDINGS_PROVIDER": cfg.Recall.Embeddings.Provider})
	var out, logs bytes.Buffer
	if err := run(context.Background(), []string{"gateway", "reindex"}, getenv, nil, &out, &logs); err != nil {
		t.Fatalf("reindex: %v\n%s", err, logs.String())
	}
	return out.String()
}

// saveIndexed stores ex in mem's store and runs its after-save hooks
// (indexing, facts) on it, as the capture path and the enricher would.
func saveIndexed(t *testing.T, ctx context.Context, mem *memoryLayer, ex memory.Exchange) {
	t.Helper()
	res, err := mem.store.SaveExchange(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	if err := record.RunHooks(ctx, mem.recall.Hooks, []memory.Exchange{ex}, []memory.SaveResult{res}); err != nil {
		t.Fatal(err)
	}
}
