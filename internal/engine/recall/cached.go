package recall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrEmbeddingLate reports that the vectors a caller waited for did not
// arrive by its embedding deadline (see WithEmbedDeadline). The call goes on
// without the caller and fills the cache, so the next request with the same
// text finds its vector there.
var ErrEmbeddingLate = errors.New("embedding late")

// Timeouts of the calls a Cached embedder makes on nobody's behalf.
const (
	// DefaultFlightTimeout bounds one shared embedding call, which no
	// request's deadline cuts short.
	DefaultFlightTimeout = 30 * time.Second
	// cacheWriteTimeout bounds writing the vectors of one call to the cache.
	cacheWriteTimeout = 5 * time.Second
)

// embedDeadlineKey carries the time a caller stops waiting for vectors.
type embedDeadlineKey struct{}

// WithEmbedDeadline returns ctx telling a Cached embedder to wait for the
// vectors it must fetch no later than t: past it, Embed fails with
// ErrEmbeddingLate while ctx itself stays alive for the caller's other work
// (a full-text search in place of the vector one).
func WithEmbedDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, embedDeadlineKey{}, t)
}

// Cached is an Embedder that asks its cache first and embeds only the texts
// the cache lacks. Concurrent requests for the same text share one call: a
// text already being embedded is waited for, not embedded again. Calls run
// under their own context (detached from the caller's, bounded by the flight
// timeout), so a caller that stops waiting — its request ended, or its embed
// deadline passed — neither cancels the call nor loses its result, which is
// written to the cache under its own deadline too. A failing cache is logged
// and bypassed, never fatal. It is safe for concurrent use.
type Cached struct {
	inner   Embedder
	cache   EmbeddingCache
	logger  *slog.Logger
	timeout time.Duration

	mu       sync.Mutex
	inflight map[string]*flight // by content hash
	// settled counts flights removed from inflight (their vectors written
	// to the cache, or failed). A caller whose cache read raced a flight's
	// end sees it change and reads the cache again rather than embed anew.
	settled uint64
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

// Collectors returns the inner embedder's Prometheus collectors, if it has
// any.
func (c *Cached) Collectors() []prometheus.Collector {
	if in, ok := c.inner.(interface{ Collectors() []prometheus.Collector }); ok {
		return in.Collectors()
	}
	return nil
}

// Model returns the inner embedder's model.
func (c *Cached) Model() string { return c.inner.Model() }

// Dims returns the inner embedder's dimension.
func (c *Cached) Dims() int { return c.inner.Dims() }

// Embed returns one vector per text, from the cache where it has them; the
// rest are embedded — each distinct text once, joining a call already
// embedding it — and written back. It waits until ctx ends or the deadline
// set by WithEmbedDeadline passes (then ErrEmbeddingLate).
func (c *Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	model, dims := c.inner.Model(), c.inner.Dims()
	hashes := make([]string, len(texts))
	for i, t := range texts {
		hashes[i] = ContentHash(model, t)
	}
	out := make([][]float32, len(texts))
	waits := map[string]*flight{}
	var mineTexts []string
	var mine []*flight
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		gen := c.settled
		c.mu.Unlock()
		hit, err := c.cache.GetEmbeddings(ctx, model, dims, hashes)
		if err != nil {
			c.logger.Warn("embedding cache read failed; embedding without it", "error", err)
			hit = nil
		}
		c.mu.Lock()
		if c.settled != gen && attempt < 2 && c.lacksFlight(hashes, hit, dims) {
			// A flight ended between the cache read and now: the
			// vectors it wrote may be the ones missing. Read again.
			c.mu.Unlock()
			continue
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
		break
	}
	if len(waits) == 0 {
		return out, nil
	}
	if len(mine) > 0 {
		go c.fly(context.WithoutCancel(ctx), mineTexts, mine)
	}
	wctx := ctx
	if t, ok := ctx.Value(embedDeadlineKey{}).(time.Time); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, t)
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

// lacksFlight reports whether a text missing from hit has no flight to
// join. c.mu must be held.
func (c *Cached) lacksFlight(hashes []string, hit map[string][]float32, dims int) bool {
	for _, h := range hashes {
		if v, ok := hit[h]; ok && len(v) == dims {
			continue
		}
		if c.inflight[h] == nil {
			return true
		}
	}
	return false
}

// fly embeds texts for the flights fs (index for index) under a context of
// its own, publishes the result, and writes the vectors to the cache.
func (c *Cached) fly(ctx context.Context, texts []string, fs []*flight) {
	model, dims := c.inner.Model(), c.inner.Dims()
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	vecs, err := c.inner.Embed(cctx, texts)
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
		c.settled++
		c.mu.Unlock()
	}()
	if err != nil {
		return
	}
	put := make(map[string][]float32, len(vecs))
	for j, v := range vecs {
		put[ContentHash(model, texts[j])] = v
	}
	wctx, wcancel := context.WithTimeout(ctx, cacheWriteTimeout)
	defer wcancel()
	if err := c.cache.PutEmbeddings(wctx, model, dims, put); err != nil {
		c.logger.Warn("embedding cache write failed", "error", err)
	}
}

// lateNoteKey carries a lateNote.
type lateNoteKey struct{}

// lateNote records that an embedding came too late for a caller.
type lateNote struct {
	mu   sync.Mutex
	late bool
}

// withLateNote returns ctx recording whether any Embed under it failed with
// ErrEmbeddingLate, and the function that reports it.
func withLateNote(ctx context.Context) (context.Context, func() bool) {
	n := &lateNote{}
	return context.WithValue(ctx, lateNoteKey{}, n), func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.late
	}
}

// noteLate reports err to ctx's lateNote when it is ErrEmbeddingLate, and
// whether it is.
func noteLate(ctx context.Context, err error) bool {
	if !errors.Is(err, ErrEmbeddingLate) {
		return false
	}
	if n, ok := ctx.Value(lateNoteKey{}).(*lateNote); ok {
		n.mu.Lock()
		n.late = true
		n.mu.Unlock()
	}
	return true
}
