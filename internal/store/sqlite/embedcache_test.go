package sqlite_test

import (
	"context"
	"reflect"
	"testing"
)

func TestEmbeddingCache(t *testing.T) {
	s, path := mustTempStore(t)
	ctx := context.Background()
	if err := s.PutEmbeddings(ctx, "m", 3, map[string][]float32{
		"h1": {1, 2, 3},
		"h2": {-0.5, 0, 1e-7},
	}); err != nil {
		t.Fatalf("PutEmbeddings: %v", err)
	}
	if err := s.PutEmbeddings(ctx, "other", 3, map[string][]float32{"h1": {9, 9, 9}}); err != nil {
		t.Fatalf("PutEmbeddings(other model): %v", err)
	}
	if err := s.PutEmbeddings(ctx, "m", 2, map[string][]float32{"h1": {7, 7}}); err != nil {
		t.Fatalf("PutEmbeddings(other dims): %v", err)
	}
	// Replacing a cached hash keeps one row with the new vector.
	if err := s.PutEmbeddings(ctx, "m", 3, map[string][]float32{"h2": {4, 5, 6}}); err != nil {
		t.Fatalf("PutEmbeddings(replace): %v", err)
	}

	tests := []struct {
		name   string
		model  string
		dims   int
		hashes []string
		want   map[string][]float32
	}{
		{"hits and a miss", "m", 3, []string{"h1", "h2", "h3"}, map[string][]float32{"h1": {1, 2, 3}, "h2": {4, 5, 6}}},
		{"duplicates asked", "m", 3, []string{"h1", "h1"}, map[string][]float32{"h1": {1, 2, 3}}},
		{"other model", "other", 3, []string{"h1", "h2"}, map[string][]float32{"h1": {9, 9, 9}}},
		{"other dims", "m", 2, []string{"h1"}, map[string][]float32{"h1": {7, 7}}},
		{"unknown model", "nope", 3, []string{"h1"}, map[string][]float32{}},
		{"no hashes", "m", 3, nil, map[string][]float32{}},
		{"hash with quotes", "m", 3, []string{`"],["h1`, "h1"}, map[string][]float32{"h1": {1, 2, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.GetEmbeddings(ctx, tt.model, tt.dims, tt.hashes)
			if err != nil {
				t.Fatalf("GetEmbeddings: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("GetEmbeddings = %v, want %v", got, tt.want)
			}
		})
	}

	var rows int
	if err := mustRawDB(t, path).QueryRow(`SELECT COUNT(*) FROM embedding_cache WHERE tenant = ''`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 4 {
		t.Fatalf("embedding_cache has %d rows, want 4", rows)
	}
}

// TestDeleteUserEmptiesEmbeddingCache: the cache names no owner, so an
// erasure empties it, every model and dimension, in the erasure's
// transaction: none of the erased user's vectors can be read back, nor are
// they in the file.
func TestDeleteUserEmptiesEmbeddingCache(t *testing.T) {
	s, path := mustTempStore(t)
	ctx := context.Background()
	for model, dims := range map[string]int{"m": 3, "other": 2} {
		vecs := map[string][]float32{"h1": make([]float32, dims), "h2": make([]float32, dims)}
		if err := s.PutEmbeddings(ctx, model, dims, vecs); err != nil {
			t.Fatalf("PutEmbeddings(%s): %v", model, err)
		}
	}
	if got, err := s.GetEmbeddings(ctx, "m", 3, []string{"h1", "h2"}); err != nil || len(got) != 2 {
		t.Fatalf("GetEmbeddings before the erasure = %v, %v; want both", got, err)
	}
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	for model, dims := range map[string]int{"m": 3, "other": 2} {
		if got, err := s.GetEmbeddings(ctx, model, dims, []string{"h1", "h2"}); err != nil || len(got) != 0 {
			t.Fatalf("GetEmbeddings(%s) after the erasure = %v, %v; want nothing", model, got, err)
		}
	}
	var rows int
	if err := mustRawDB(t, path).QueryRow(`SELECT COUNT(*) FROM embedding_cache`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("embedding_cache has %d rows after the erasure, want 0", rows)
	}
}
