package cache

import (
	"context"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultEmbeddingBytes bounds the embeddings kept: 16 MiB, about 10,000
// vectors of 384 dimensions.
const DefaultEmbeddingBytes = 16 << 20

// Embeddings keeps vectors in memory by the model and dimension that made
// them and the hash of the text they embed (recall.ContentHash), so that
// embedding the same text again (a repeated question, a redelivered
// capture, a fact stated again) costs no provider call: recall.Cached's
// EmbeddingCache. A kept vector is never stale. It holds no text and no
// owner, so an erasure empties it (Writes.DeleteUser). It is safe for
// concurrent use.
type Embeddings struct {
	vecs *Cache[embeddingKey, []float32]
}

// embeddingKey names one kept vector.
type embeddingKey struct {
	Model string
	Dims  int
	Hash  string
}

// NewEmbeddings returns an empty Embeddings bounded at max bytes.
func NewEmbeddings(max int) *Embeddings {
	return &Embeddings{vecs: New("embeddings", max, func(k embeddingKey, v []float32) int {
		return len(k.Model) + len(k.Hash) + 4*len(v)
	})}
}

// GetEmbeddings returns the vectors of model and dims kept for hashes,
// keyed by hash; hashes never kept are absent. The vectors are the
// caller's.
func (e *Embeddings) GetEmbeddings(_ context.Context, model string, dims int, hashes []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(hashes))
	for _, h := range hashes {
		if v, ok := e.vecs.Get(embeddingKey{model, dims, h}); ok {
			out[h] = slices.Clone(v)
		}
	}
	return out, nil
}

// PutEmbeddings keeps vecs, made by model with dims dimensions, by content
// hash, replacing any kept under the same hash.
func (e *Embeddings) PutEmbeddings(_ context.Context, model string, dims int, vecs map[string][]float32) error {
	for h, v := range vecs {
		e.vecs.Put(embeddingKey{model, dims, h}, slices.Clone(v))
	}
	return nil
}

// Clear drops every vector kept: for an erasure, since no entry names its
// owner.
func (e *Embeddings) Clear() { e.vecs.Drop(func(embeddingKey) bool { return true }) }

// Collectors returns the Prometheus collectors of e's cache.
func (e *Embeddings) Collectors() []prometheus.Collector { return e.vecs.Collectors() }
