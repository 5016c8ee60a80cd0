package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// The stores implement what recall needs of them.
var (
	_ store                 = (*sqlite.Store)(nil)
	_ store                 = (*postgres.Store)(nil)
	_ recall.Reembedder     = (*sqlite.Store)(nil)
	_ recall.Reembedder     = (*postgres.Store)(nil)
	_ recall.EmbeddingCache = (*cache.Cache[recall.EmbeddingKey, []float32])(nil)
)

// embeddingsUpstream answers /v1/embeddings with local-embedder vectors of
// the requested dimension, counting the texts it embedded.
func embeddingsUpstream(texts *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input      []string `json:"input"`
			Dimensions int      `json:"dimensions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		texts.Add(int64(len(req.Input)))
		vecs, _ := recall.NewLocal(req.Dimensions).Embed(r.Context(), req.Input, time.Time{})
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]datum, len(vecs))
		for i, v := range vecs {
			data[i] = datum{i, v}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "text-embedding-3-small"})
	})
}

// TestOpenAIEmbedderWiredWithCache: provider openai embeds through the
// configured endpoint behind the engine's embedding cache, with either
// store: the same texts a second time make no request.
func TestOpenAIEmbedderWiredWithCache(t *testing.T) {
	var texts atomic.Int64
	emb := upstreamtest.New(t, embeddingsUpstream(&texts))
	up := upstreamtest.New(t, upstreamtest.Default())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			cfg.Recall.Embeddings = config.Embeddings{Provider: "openai", BaseURL: emb.URL(), Model: "text-embedding-3-small", Dimensions: 256, Batch: 2}
			logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
			bk, err := openStore(context.Background(), cfg, nil, logger)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bk.close() })
			e, _, err := newEmbedder(cfg.Recall.Embeddings, cfg.Upstream, bk.embeddings, nil, logger)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := e.(*recall.Cached); !ok {
				t.Fatalf("embedder is %T, want it behind a cache", e)
			}
			in := []string{"I live in Lisbon " + name, "I am vegetarian " + name, "I moved to Porto " + name}
			before := texts.Load()
			first, err := e.Embed(context.Background(), in, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if got := texts.Load() - before; got != 3 {
				t.Fatalf("first call embedded %d texts, want 3", got)
			}
			second, err := e.Embed(context.Background(), in, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if got := texts.Load() - before; got != 3 {
				t.Fatalf("second call embedded %d more texts, want none (cache)", got-3)
			}
			for i := range in {
				if len(second[i]) != 256 || recall.Cosine(first[i], second[i]) < 0.9999 {
					t.Fatalf("cached vector %d differs", i)
				}
			}
		})
	}
}
