package recall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"
)

// Embedder turns texts into vectors. Vectors of one Embedder all have Dims()
// dimensions and are recorded with Model() and Dims(), so a model change is
// detected and re-embedded by `gateway reindex`.
type Embedder interface {
	// Embed returns one vector per text, in order. by, when not zero, is
	// when the caller stops waiting (a request's query): an embedder that
	// may queue or share calls fails with ErrEmbeddingLate past it, and
	// treats the call as the request path's; by zero is a call on
	// nobody's behalf (indexing), waited for until ctx ends. An embedder
	// that does neither ignores by.
	Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error)
	// Model names the model the vectors come from.
	Model() string
	// Dims is the vector dimension.
	Dims() int
}

// OwnedEmbedder is an Embedder that also embeds texts on their owners'
// behalf, keeping what it shares between calls (a cache, a call in flight)
// to each owner: Cached. The Searcher, Recaller, Indexer and Reindex embed
// through it, so that what one owner embedded never makes another's call
// faster.
type OwnedEmbedder interface {
	Embedder
	// EmbedOwned is Embed of the texts, each on its owner's behalf.
	EmbedOwned(ctx context.Context, texts []Owned, by time.Time) ([][]float32, error)
}

// owning returns emb as an OwnedEmbedder: itself when it is one (Cached),
// else emb embedding the texts alone — an embedder that keeps nothing
// between calls (the provider's, the local one, a test's) has nothing to
// keep apart.
func owning(emb Embedder) OwnedEmbedder {
	if o, ok := emb.(OwnedEmbedder); ok {
		return o
	}
	return unowned{emb}
}

// unowned is an Embedder that keeps nothing between calls, as an
// OwnedEmbedder.
type unowned struct{ Embedder }

// EmbedOwned embeds the texts, whoever owns them.
func (u unowned) EmbedOwned(ctx context.Context, texts []Owned, by time.Time) ([][]float32, error) {
	plain := make([]string, len(texts))
	for i, t := range texts {
		plain[i] = t.Text
	}
	return u.Embed(ctx, plain, by)
}

// itemTexts returns the texts of items, each owned by its item's user.
func itemTexts(items []memory.Item) []Owned {
	out := make([]Owned, len(items))
	for i, it := range items {
		out[i] = Owned{Tenant: it.Tenant, User: it.User, Text: it.Text}
	}
	return out
}

// ownedBy returns texts, each owned by tenant's user.
func ownedBy(tenant, user string, texts ...string) []Owned {
	out := make([]Owned, len(texts))
	for i, t := range texts {
		out[i] = Owned{Tenant: tenant, User: user, Text: t}
	}
	return out
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
	// latency times each Embed call (memgate_embedding_seconds).
	latency prometheus.Histogram
}

// NewOpenAI returns an embedder calling client with model, asking for dims
// dimensions and sending at most batch texts per request (batch < 1 means 1).
func NewOpenAI(client EmbeddingsClient, model string, dims, batch int) *OpenAI {
	return &OpenAI{client: client, model: model, dims: dims, batch: max(1, batch),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_embedding_seconds",
			Help:    "Duration of embedding calls to the provider (one per Embed, its batches included), whether a request waited for them or not.",
			Buckets: []float64{.005, .01, .025, .05, .1, .15, .2, .25, .3, .4, .5, 1, 2.5, 5},
		})}
}

// Collectors returns the embedder's Prometheus collectors: the latency of
// its calls to the provider.
func (o *OpenAI) Collectors() []prometheus.Collector { return []prometheus.Collector{o.latency} }

// Model returns the embedding model's name.
func (o *OpenAI) Model() string { return o.model }

// Dims returns the vector dimension asked for.
func (o *OpenAI) Dims() int { return o.dims }

// Embed returns one vector per text. It fails when the endpoint fails or
// answers with a vector count or dimension other than asked for. It
// ignores by: ctx bounds the call.
func (o *OpenAI) Embed(ctx context.Context, texts []string, _ time.Time) ([][]float32, error) {
	defer func(start time.Time) { o.latency.Observe(time.Since(start).Seconds()) }(time.Now())
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

// ContentHash is the cache key of text embedded by model: the hex sha256 of
// the model name, a NUL byte and the text.
func ContentHash(model, text string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}
