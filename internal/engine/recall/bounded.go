package recall

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// InProcess is an embedder that computes in process (the built-in
// encoder, encoder.Embedder), one call on up to a given number of cores.
type InProcess interface {
	Embedder
	// EmbedOn is Embed with the call's work split over up to cores
	// goroutines.
	EmbedOn(ctx context.Context, texts []string, cores int) ([][]float32, error)
}

// Bounded is an Embedder in front of one that computes in process (the
// built-in encoder): its calls take at most slots cores at once, one
// slot a core, so embedding never takes more than slots cores, however
// many requests arrive.
//
//   - A query's embedding (a call with a deadline, as recall makes for
//     the request path, or a Cached flight started by one) waits for a
//     slot until that deadline at most; past it the call fails with
//     ErrEmbeddingLate, so the request searches with full text alone and
//     says so (X-Memory-Degraded: embedding) instead of queueing behind
//     the encoder. It too embeds in batches of at most batch texts. A
//     batch also takes the slots free when it starts and runs on that
//     many cores: a request's query, which it waits for, takes a fraction
//     of one core's time when the encoder is otherwise idle (as at one
//     connection), and no more than its one slot when it is busy.
//   - Any other call (indexing, reindex) embeds in batches of at most
//     batch texts, taking a slot per batch, and at most slots-1 of them
//     run at once (one when slots is 1): between two batches a waiting
//     query takes the slot, so indexing stays behind the request path.
//
// It is safe for concurrent use.
type Bounded struct {
	inner      InProcess
	slots      chan struct{}
	background chan struct{}
	batch      int

	latency   prometheus.Histogram
	saturated prometheus.Counter
}

// NewBounded returns inner limited to slots concurrent calls (at least 1),
// background calls split into batches of batch texts (at least 1).
func NewBounded(inner InProcess, slots, batch int) *Bounded {
	slots = max(1, slots)
	return &Bounded{
		inner:      inner,
		slots:      make(chan struct{}, slots),
		background: make(chan struct{}, max(1, slots-1)),
		batch:      max(1, batch),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_encoder_seconds",
			Help:    "Duration of one batch through the built-in encoder, its wait for a slot excluded.",
			Buckets: []float64{.002, .005, .01, .02, .05, .1, .2, .5, 1, 2.5, 5},
		}),
		saturated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_encoder_saturated_total",
			Help: "Query embeddings given up because every encoder slot stayed busy until the query's embedding deadline (the request searched with full text alone).",
		}),
	}
}

// Collectors returns the encoder's latency histogram and saturation
// counter.
func (b *Bounded) Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.latency, b.saturated}
}

// Model returns the inner embedder's model.
func (b *Bounded) Model() string { return b.inner.Model() }

// Dims returns the inner embedder's dimension.
func (b *Bounded) Dims() int { return b.inner.Dims() }

// Embed returns one vector per text, waiting for slots as Bounded says.
// Texts are embedded batch texts at a time, a slot taken per batch, so
// neither a query with many texts (the facts ranked against a question, on
// a cold cache) nor indexing holds a slot for long. A call with a
// deadline (by not zero) is a query; past by a batch still runs when a
// slot is free at once.
func (b *Bounded) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	if by.IsZero() {
		select {
		case b.background <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("embed %d texts: %w", len(texts), context.Cause(ctx))
		}
		defer func() { <-b.background }()
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += b.batch {
		if err := b.acquire(ctx, by); err != nil {
			return nil, err
		}
		cores := 1
		if !by.IsZero() {
			cores += b.spare()
		}
		vecs, err := b.run(ctx, texts[start:min(len(texts), start+b.batch)], cores)
		for range cores {
			<-b.slots
		}
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// acquire takes a slot, waiting until ctx ends or, when deadline is set,
// until then (ErrEmbeddingLate).
func (b *Bounded) acquire(ctx context.Context, deadline time.Time) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	var late <-chan time.Time
	if !deadline.IsZero() {
		wait := time.Until(deadline)
		if wait <= 0 {
			b.saturated.Inc()
			return fmt.Errorf("encoder busy: %w", ErrEmbeddingLate)
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		late = t.C
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-late:
		b.saturated.Inc()
		return fmt.Errorf("encoder busy: %w", ErrEmbeddingLate)
	case <-ctx.Done():
		return fmt.Errorf("wait for the encoder: %w", context.Cause(ctx))
	}
}

// spare takes the slots free now, without waiting, and returns how many.
func (b *Bounded) spare() int {
	n := 0
	for {
		select {
		case b.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
}

// run embeds texts on cores cores, their slots held, timing the call.
func (b *Bounded) run(ctx context.Context, texts []string, cores int) ([][]float32, error) {
	defer func(start time.Time) { b.latency.Observe(time.Since(start).Seconds()) }(time.Now())
	vecs, err := b.inner.EmbedOn(ctx, texts, cores)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embed: %d vectors for %d texts", len(vecs), len(texts))
	}
	return vecs, nil
}
