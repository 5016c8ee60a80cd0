package recall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrEmbeddingLate reports that the vectors a caller waited for did not
// arrive by its embedding deadline (Embedder.Embed's by): the caller goes
// on without them (a full-text search in place of the vector one) while
// its context stays alive for its other work. A Cached embedder's call goes
// on without the caller and fills the cache, so the next request with the
// same text finds its vector there.
var ErrEmbeddingLate = errors.New("embedding late")

// DefaultFlightTimeout bounds one shared embedding call, which no
// request's deadline cuts short.
const DefaultFlightTimeout = 30 * time.Second

// Cached is an Embedder that asks its cache first and embeds only the texts
// the cache lacks. Concurrent requests for the same text share one call: a
// text already being embedded is waited for, not embedded again. Calls run
// under their own context (detached from the caller's, bounded by the flight
// timeout), so a caller that stops waiting — its request ended, or its embed
// deadline passed — neither cancels the call nor loses its result, which is
// written to the cache. The cache is read under Cached's lock, so its reads
// must be quick (memory: internal/engine/cache's Embeddings); a failing
// cache is logged and bypassed, never fatal. It is safe for concurrent use.
type Cached struct {
	inner   Embedder
	cache   EmbeddingCache
	logger  *slog.Logger
	timeout time.Duration

	// mu orders cache reads with flights: a flight leaves inflight only
	// once its vectors are in the cache, so a text missing from the cache
	// under mu is either being embedded (joined) or embedded anew.
	mu       sync.Mutex
	inflight map[string]*flight // by content hash
}

// flight is one text being embedded; done closes when vec or err is set.
type flight struct {
	done chan struct{}
	vec  []float32
	err  error
}

// NewCached returns inner behind cache. logger may be nil.
func NewCached(inner Embedder, cache EmbeddingCache, logger *slog.Logger) *Cached {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cached{inner: inner, cache: cache, logger: logger, timeout: DefaultFlightTimeout, inflight: map[string]*flight{}}
}

// Model returns the inner embedder's model.
func (c *Cached) Model() string { return c.inner.Model() }

// Dims returns the inner embedder's dimension.
func (c *Cached) Dims() int { return c.inner.Dims() }

// Embed returns one vector per text, from the cache where it has them; the
// rest are embedded — each distinct text once, joining a call already
// embedding it — and written back. It waits until ctx ends or, when by is
// not zero, until by passes (then ErrEmbeddingLate). A call it starts
// passes by on to the inner embedder.
func (c *Cached) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	model, dims := c.inner.Model(), c.inner.Dims()
	hashes := make([]string, len(texts))
	for i, t := range texts {
		hashes[i] = ContentHash(model, t)
	}
	out := make([][]float32, len(texts))
	waits := map[string]*flight{}
	var mineTexts []string
	var mine []*flight
	c.mu.Lock()
	hit, err := c.cache.GetEmbeddings(ctx, model, dims, hashes)
	if err != nil {
		c.logger.Warn("embedding cache read failed; embedding without it", "error", err)
	}
	for i, h := range hashes {
		if v, ok := hit[h]; ok && len(v) == dims {
			out[i] = v
			continue
		}
		if _, ok := waits[h]; ok {
			continue
		}
		f := c.inflight[h]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			c.inflight[h] = f
			mineTexts = append(mineTexts, texts[i])
			mine = append(mine, f)
		}
		waits[h] = f
	}
	c.mu.Unlock()
	if len(waits) == 0 {
		return out, nil
	}
	if len(mine) > 0 {
		go c.fly(context.WithoutCancel(ctx), mineTexts, mine, by)
	}
	wctx := ctx
	if !by.IsZero() {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	for i, h := range hashes {
		if out[i] != nil {
			continue
		}
		f := waits[h]
		select {
		case <-f.done:
		case <-wctx.Done():
			if ctx.Err() == nil {
				return nil, fmt.Errorf("embed %d texts: %w", len(waits), ErrEmbeddingLate)
			}
			return nil, fmt.Errorf("embed %d texts: %w", len(waits), context.Cause(ctx))
		}
		if f.err != nil {
			return nil, f.err
		}
		out[i] = f.vec
	}
	return out, nil
}

// fly embeds texts for the flights fs (index for index) under a context of
// its own, passing by (the deadline of the call that started it) to the
// inner embedder, publishes the result, and writes the vectors to the
// cache.
func (c *Cached) fly(ctx context.Context, texts []string, fs []*flight, by time.Time) {
	model, dims := c.inner.Model(), c.inner.Dims()
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	vecs, err := c.inner.Embed(cctx, texts, by)
	cancel()
	for j, f := range fs {
		if err != nil {
			f.err = err
		} else {
			f.vec = vecs[j]
		}
		close(f.done)
	}
	// The flights stay joinable (answering at once) until their vectors
	// are in the cache, so no request in between embeds them again.
	defer func() {
		c.mu.Lock()
		for _, t := range texts {
			delete(c.inflight, ContentHash(model, t))
		}
		c.mu.Unlock()
	}()
	if err != nil {
		return
	}
	put := make(map[string][]float32, len(vecs))
	for j, v := range vecs {
		if len(v) == dims { // the cache keeps only vectors of the model's dimension
			put[ContentHash(model, texts[j])] = v
		}
	}
	if err := c.cache.PutEmbeddings(ctx, model, dims, put); err != nil {
		c.logger.Warn("embedding cache write failed", "error", err)
	}
}

// isLate reports whether err is ErrEmbeddingLate: the caller goes on
// without the vectors.
func isLate(err error) bool { return errors.Is(err, ErrEmbeddingLate) }
