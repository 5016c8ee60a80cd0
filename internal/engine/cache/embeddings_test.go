package cache_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/recall"
)

var _ recall.EmbeddingCache = (*cache.Embeddings)(nil)

// TestEmbeddingsKeyedByModelDimsAndHash: a vector is found only under the
// model, dimension and hash it was kept with; a later one replaces it; the
// vectors handed in and out are the caller's (writing into them changes
// nothing kept).
func TestEmbeddingsKeyedByModelDimsAndHash(t *testing.T) {
	ctx := context.Background()
	e := cache.NewEmbeddings(cache.DefaultEmbeddingBytes)
	in := map[string][]float32{"h1": {1, 2, 3}, "h2": {4, 5, 6}}
	if err := e.PutEmbeddings(ctx, "m", 3, in); err != nil {
		t.Fatal(err)
	}
	in["h1"][0] = 99
	if err := e.PutEmbeddings(ctx, "m", 3, map[string][]float32{"h2": {7, 8, 9}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		model  string
		dims   int
		hashes []string
		want   map[string][]float32
	}{
		{"kept", "m", 3, []string{"h1", "h2", "h3"}, map[string][]float32{"h1": {1, 2, 3}, "h2": {7, 8, 9}}},
		{"another model", "other", 3, []string{"h1", "h2"}, map[string][]float32{}},
		{"another dimension", "m", 2, []string{"h1", "h2"}, map[string][]float32{}},
		{"none asked", "m", 3, nil, map[string][]float32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.GetEmbeddings(ctx, tt.model, tt.dims, tt.hashes)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.EqualFunc(got, tt.want, slices.Equal) {
				t.Fatalf("GetEmbeddings = %v, want %v", got, tt.want)
			}
			for _, v := range got {
				v[0] = -1 // the caller's
			}
		})
	}
	if got, _ := e.GetEmbeddings(ctx, "m", 3, []string{"h1"}); !slices.Equal(got["h1"], []float32{1, 2, 3}) {
		t.Fatalf("a vector written into by its caller changed what is kept: %v", got["h1"])
	}
}

// TestErasureEmptiesEmbeddings: the embeddings name no owner, so an
// erasure through Writes empties them all (another user's too), whether
// or not the store's delete succeeded.
func TestErasureEmptiesEmbeddings(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t, "")
	e := cache.NewEmbeddings(cache.DefaultEmbeddingBytes)
	w := cache.NewReads(st, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes).Through(st, e)
	for _, model := range []string{"m", "other"} {
		if err := e.PutEmbeddings(ctx, model, 2, map[string][]float32{"h1": {1, 2}, "h2": {3, 4}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"m", "other"} {
		if got, _ := e.GetEmbeddings(ctx, model, 2, []string{"h1", "h2"}); len(got) != 0 {
			t.Fatalf("after an erasure %s's vectors are still kept: %v", model, got)
		}
	}
	if n, _ := cache.EmbeddingUsage(e); n != 0 {
		t.Fatalf("after an erasure %d vectors are still in memory", n)
	}
}
