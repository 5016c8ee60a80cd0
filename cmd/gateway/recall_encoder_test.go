package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/encoder"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/upstreamtest"
)

var _ recall.Embedder = (*encoder.Embedder)(nil)

// TestEncoderIsTheDefaultEmbedder: with the default configuration recall
// embeds with the built-in encoder (512 dimensions, its model name
// recorded), behind the engine's embedding cache, and its vectors match
// meaning: a meal said one way is nearer a meal said another way than an
// unrelated errand.
func TestEncoderIsTheDefaultEmbedder(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Default())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
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
			if e.Model() != encoder.ModelName || e.Dims() != 512 {
				t.Fatalf("embedder %s/%d, want %s/512", e.Model(), e.Dims(), encoder.ModelName)
			}
			in := []string{"I grabbed a bite with my sister after work", "We had dinner together at a restaurant", "The car needs new tyres before winter"}
			vecs, err := e.Embed(context.Background(), in, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			meal, errand := recall.Cosine(vecs[0], vecs[1]), recall.Cosine(vecs[0], vecs[2])
			if meal <= errand {
				t.Fatalf("cosine(bite, dinner) = %.3f <= cosine(bite, tyres) = %.3f", meal, errand)
			}
			again, err := e.Embed(context.Background(), in[:1], time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if recall.Cosine(again[0], vecs[0]) < 0.9999 {
				t.Fatal("the cached vector differs")
			}
		})
	}
}

// TestEmbedderDimensions: recall.embeddings.dimensions 0 is the provider's
// own, and the encoder refuses another.
func TestEmbedderDimensions(t *testing.T) {
	for _, tc := range []struct {
		provider string
		dims     int
		want     int
		valid    bool
	}{
		{"encoder", 0, 512, true},
		{"encoder", 512, 512, true},
		{"encoder", 384, 0, false},
		{"local", 0, 384, true},
		{"local", 256, 256, true},
		{"openai", 0, 384, true},
		{"openai", 1536, 1536, true},
	} {
		cfg := config.Default()
		cfg.Recall.Embeddings.Provider, cfg.Recall.Embeddings.Dimensions = tc.provider, tc.dims
		err := cfg.Validate()
		if (err == nil) != tc.valid {
			t.Errorf("%s/%d: Validate() = %v, want valid %v", tc.provider, tc.dims, err, tc.valid)
		}
		if tc.valid && cfg.Recall.Embeddings.Dims() != tc.want {
			t.Errorf("%s/%d: Dims() = %d, want %d", tc.provider, tc.dims, cfg.Recall.Embeddings.Dims(), tc.want)
		}
	}
}
