package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// mustEmbeddingCache returns an embedding cache on the test Redis under a
// private prefix.
func mustEmbeddingCache(tb testing.TB, ttl time.Duration) *EmbeddingCache {
	tb.Helper()
	return NewEmbeddingCache(mustClient(tb), testenv.RedisPrefix(tb), ttl)
}

func TestEmbeddingCacheRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := mustEmbeddingCache(t, time.Hour)
	vecs := map[string][]float32{
		"h1": {0.25, -1, 3.5e-7, float32(math.Inf(1))},
		"h2": {0, float32(math.Copysign(0, -1)), 1, -0.125},
	}
	if err := c.PutEmbeddings(ctx, "m", 4, vecs); err != nil {
		t.Fatalf("PutEmbeddings: %v", err)
	}
	tests := []struct {
		name   string
		model  string
		dims   int
		hashes []string
		want   map[string][]float32
	}{
		{"hits and a miss", "m", 4, []string{"h1", "nope", "h2"}, vecs},
		{"other model", "m2", 4, []string{"h1", "h2"}, map[string][]float32{}},
		{"other dims", "m", 3, []string{"h1", "h2"}, map[string][]float32{}},
		{"nothing asked", "m", 4, nil, map[string][]float32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.GetEmbeddings(ctx, tt.model, tt.dims, tt.hashes)
			if err != nil {
				t.Fatalf("GetEmbeddings: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("GetEmbeddings = %v, want %v", got, tt.want)
			}
			for h, w := range tt.want {
				// Compare bits, so -0 and +Inf round-trip exactly.
				g := got[h]
				if len(g) != len(w) {
					t.Fatalf("vector %s = %v, want %v", h, g, w)
				}
				for i := range w {
					if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
						t.Fatalf("vector %s = %v, want %v", h, g, w)
					}
				}
			}
		})
	}
}

func TestEmbeddingCacheManyKeysAndTTL(t *testing.T) {
	ctx := context.Background()
	rdb := mustClient(t)
	prefix := testenv.RedisPrefix(t)
	c := NewEmbeddingCache(rdb, prefix, time.Hour)
	// More than one MGET batch and one pipeline.
	const n = 2*embeddingBatch + 7
	vecs := make(map[string][]float32, n)
	hashes := make([]string, 0, n)
	for i := range n {
		h := fmt.Sprintf("hash-%d", i)
		vecs[h] = []float32{float32(i), float32(-i), 0.5}
		hashes = append(hashes, h)
	}
	if err := c.PutEmbeddings(ctx, "m", 3, vecs); err != nil {
		t.Fatalf("PutEmbeddings: %v", err)
	}
	got, err := c.GetEmbeddings(ctx, "m", 3, hashes)
	if err != nil {
		t.Fatalf("GetEmbeddings: %v", err)
	}
	if !reflect.DeepEqual(got, vecs) {
		t.Fatalf("GetEmbeddings returned %d vectors, want all %d equal to what was put", len(got), n)
	}
	ttl, err := rdb.PTTL(ctx, c.key("m", 3, "hash-0")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > time.Hour {
		t.Fatalf("cached vector TTL = %v, want within (0, 1h]", ttl)
	}
	if raw, err := rdb.Get(ctx, c.key("m", 3, "hash-1")).Bytes(); err != nil || len(raw) != 12 {
		t.Fatalf("stored value = %x, %v; want 12 bytes of little-endian float32", raw, err)
	}
}

func TestEmbeddingCacheUnavailable(t *testing.T) {
	rdb, err := NewClient("redis://" + closedPort(t) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	c := NewEmbeddingCache(rdb, "x:", time.Hour)
	if _, err := c.GetEmbeddings(context.Background(), "m", 2, []string{"h"}); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("GetEmbeddings on a dead Redis = %v, want memory.ErrUnavailable", err)
	}
	if err := c.PutEmbeddings(context.Background(), "m", 1, map[string][]float32{"h": {1}}); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("PutEmbeddings on a dead Redis = %v, want memory.ErrUnavailable", err)
	}
}

// TestEraseEmptiesEmbeddingCache: the embedding cache names no owner, so a
// user's erasure through Cached empties the embedding cache kept under
// its Tails' prefix — every model, every dimension, more keys than one
// SCAN step returns — and nothing under another deployment's prefix, even
// one the first prefix would match as a glob pattern.
func TestEraseEmptiesEmbeddingCache(t *testing.T) {
	ctx := context.Background()
	rdb := mustClient(t)
	base := testenv.RedisPrefix(t)
	prefix, other := base+"a*", base+"ab"
	cache := Cached{Store: mustPG(t), Tails: NewTails(rdb, nil, prefix, 0)}
	mine, theirs := NewEmbeddingCache(rdb, prefix, time.Hour), NewEmbeddingCache(rdb, other, time.Hour)
	many := map[string][]float32{}
	for i := range clearBatch + 10 {
		many[fmt.Sprintf("h%d", i)] = []float32{float32(i), 1}
	}
	for _, c := range []*EmbeddingCache{mine, theirs} {
		if err := c.PutEmbeddings(ctx, "m", 2, many); err != nil {
			t.Fatalf("PutEmbeddings: %v", err)
		}
		if err := c.PutEmbeddings(ctx, "other", 3, map[string][]float32{"h1": {1, 2, 3}}); err != nil {
			t.Fatalf("PutEmbeddings: %v", err)
		}
	}
	if err := cache.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	hashes := make([]string, 0, len(many))
	for h := range many {
		hashes = append(hashes, h)
	}
	for _, tt := range []struct {
		name  string
		c     *EmbeddingCache
		model string
		dims  int
		want  int
	}{
		{"erased deployment", mine, "m", 2, 0},
		{"erased deployment, other model", mine, "other", 3, 0},
		{"other deployment", theirs, "m", 2, len(many)},
		{"other deployment, other model", theirs, "other", 3, 1},
	} {
		got, err := tt.c.GetEmbeddings(ctx, tt.model, tt.dims, hashes)
		if err != nil {
			t.Fatalf("%s: GetEmbeddings: %v", tt.name, err)
		}
		if len(got) != tt.want {
			t.Errorf("%s: %d vectors after the erasure, want %d", tt.name, len(got), tt.want)
		}
	}
	if n, err := rdb.Keys(ctx, globEscape(prefix+embeddingSpace)+"*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("keys left under the erased prefix: %d (%v)", len(n), err)
	}
}
