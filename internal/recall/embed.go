package recall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"

	openai "github.com/sashabaranov/go-openai"
)

// Embedder turns texts into vectors. Vectors of one Embedder all have Dims()
// dimensions and are recorded with Model() and Dims(), so a model change is
// detected and re-embedded by `gateway reindex`.
type Embedder interface {
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the model the vectors come from.
	Model() string
	// Dims is the vector dimension.
	Dims() int
}

// EmbeddingsClient is the one call the OpenAI embedder makes (go-openai's
// *openai.Client implements it).
type EmbeddingsClient interface {
	CreateEmbeddings(ctx context.Context, conv openai.EmbeddingRequestConverter) (openai.EmbeddingResponse, error)
}

// OpenAI embeds through an OpenAI-compatible /v1/embeddings endpoint, in
// batches of at most batch texts per call.
type OpenAI struct {
	client EmbeddingsClient
	model  string
	dims   int
	batch  int
}

// NewOpenAI returns an embedder calling client with model, asking for dims
// dimensions and sending at most batch texts per request (batch < 1 means 1).
func NewOpenAI(client EmbeddingsClient, model string, dims, batch int) *OpenAI {
	return &OpenAI{client: client, model: model, dims: dims, batch: max(1, batch)}
}

// Model returns the embedding model's name.
func (o *OpenAI) Model() string { return o.model }

// Dims returns the vector dimension asked for.
func (o *OpenAI) Dims() int { return o.dims }

// Embed returns one vector per text. It fails when the endpoint fails or
// answers with a vector count or dimension other than asked for.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for start := 0; start < len(texts); start += o.batch {
		end := min(len(texts), start+o.batch)
		resp, err := o.client.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{
			Input:      texts[start:end],
			Model:      openai.EmbeddingModel(o.model),
			Dimensions: o.dims,
		})
		if err != nil {
			return nil, fmt.Errorf("embed %d texts: %w", end-start, err)
		}
		if len(resp.Data) != end-start {
			return nil, fmt.Errorf("embed: %d vectors for %d texts", len(resp.Data), end-start)
		}
		for i, d := range resp.Data {
			idx := d.Index
			if idx < 0 || idx >= end-start {
				idx = i
			}
			if len(d.Embedding) != o.dims {
				return nil, fmt.Errorf("embed: vector of %d dimensions, want %d", len(d.Embedding), o.dims)
			}
			out[start+idx] = d.Embedding
		}
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("embed: no vector for text %d", i)
		}
	}
	return out, nil
}

// EmbeddingCache stores vectors by content hash (see ContentHash): Redis in
// postgres mode, a table in sqlite mode.
type EmbeddingCache interface {
	// GetEmbeddings returns the cached vectors among hashes (missing ones are absent).
	GetEmbeddings(ctx context.Context, model string, dims int, hashes []string) (map[string][]float32, error)
	// PutEmbeddings stores vectors by hash.
	PutEmbeddings(ctx context.Context, model string, dims int, vecs map[string][]float32) error
}

// ContentHash is the cache key of text embedded by model: the hex sha256 of
// the model name, a NUL byte and the text.
func ContentHash(model, text string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

// Cached is an Embedder that asks its cache first and embeds only the texts
// the cache lacks. A failing cache is logged and bypassed, never fatal.
type Cached struct {
	inner  Embedder
	cache  EmbeddingCache
	logger *slog.Logger
}

// NewCached returns inner behind cache. logger may be nil.
func NewCached(inner Embedder, cache EmbeddingCache, logger *slog.Logger) *Cached {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cached{inner: inner, cache: cache, logger: logger}
}

// Model returns the inner embedder's model.
func (c *Cached) Model() string { return c.inner.Model() }

// Dims returns the inner embedder's dimension.
func (c *Cached) Dims() int { return c.inner.Dims() }

// Embed returns one vector per text, from the cache where it has them; the
// rest are embedded (each distinct text once) and written back.
func (c *Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	model, dims := c.inner.Model(), c.inner.Dims()
	hashes := make([]string, len(texts))
	for i, t := range texts {
		hashes[i] = ContentHash(model, t)
	}
	hit, err := c.cache.GetEmbeddings(ctx, model, dims, hashes)
	if err != nil {
		c.logger.Warn("embedding cache read failed; embedding without it", "error", err)
		hit = nil
	}
	out := make([][]float32, len(texts))
	var missTexts []string
	missIdx := map[string][]int{}
	for i, h := range hashes {
		if v, ok := hit[h]; ok && len(v) == dims {
			out[i] = v
			continue
		}
		if _, seen := missIdx[h]; !seen {
			missTexts = append(missTexts, texts[i])
		}
		missIdx[h] = append(missIdx[h], i)
	}
	if len(missTexts) == 0 {
		return out, nil
	}
	vecs, err := c.inner.Embed(ctx, missTexts)
	if err != nil {
		return nil, err
	}
	put := make(map[string][]float32, len(vecs))
	for j, v := range vecs {
		h := ContentHash(model, missTexts[j])
		put[h] = v
		for _, i := range missIdx[h] {
			out[i] = v
		}
	}
	if err := c.cache.PutEmbeddings(ctx, model, dims, put); err != nil {
		c.logger.Warn("embedding cache write failed", "error", err)
	}
	return out, nil
}
