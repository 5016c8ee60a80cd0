// Package savings records, per tenant and time bucket, what memory-on chat
// requests would have cost with their full stored history against what
// memory sent, and how many were forwarded without memory. It counts in
// process memory for a few seconds and adds the counts to the store, so the
// history survives restarts and several gateways add up.
package savings

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Store is where the counts go (implemented by the SQL stores).
type Store interface {
	AddSavings(ctx context.Context, bs []memory.SavingsBucket) error
}

// Preparer is the memory layer the proxy calls (implemented by
// internal/engine/prompt).
type Preparer interface {
	Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error)
}

// Defaults of a Recorder.
const (
	// DefaultBucket is the width of a stored bucket.
	DefaultBucket = 5 * time.Minute
	// DefaultFlushEvery is how often Run adds the pending counts to the store.
	DefaultFlushEvery = 10 * time.Second
	// maxPending bounds the buckets kept while the store is down: beyond it
	// the oldest counts are dropped (and logged), never memory without end.
	maxPending = 10000
)

// key identifies a pending bucket.
type key struct {
	tenant string
	start  int64
}

// Recorder counts savings and flushes them to a Store. It is safe for
// concurrent use.
type Recorder struct {
	store  Store
	bucket time.Duration
	log    *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	pending map[key]*memory.SavingsBucket
	// flushing serializes flushes, so counts are never added twice.
	flushing sync.Mutex
}

// New returns a Recorder adding to store in buckets of width bucket
// (<= 0: DefaultBucket). now is the clock (nil: time.Now).
func New(store Store, bucket time.Duration, now func() time.Time, logger *slog.Logger) *Recorder {
	if bucket <= 0 {
		bucket = DefaultBucket
	}
	if now == nil {
		now = time.Now
	}
	return &Recorder{store: store, bucket: bucket, log: logger, now: now, pending: map[key]*memory.SavingsBucket{}}
}

// entry returns the pending bucket of tenant now; r.mu must be held.
func (r *Recorder) entry(tenant string) *memory.SavingsBucket {
	start := r.now().UTC().Truncate(r.bucket)
	k := key{tenant, start.UnixNano()}
	b := r.pending[k]
	if b == nil {
		if len(r.pending) >= maxPending {
			r.dropOldest()
		}
		b = &memory.SavingsBucket{Tenant: tenant, Start: start}
		r.pending[k] = b
	}
	return b
}

// dropOldest forgets the oldest pending bucket; r.mu must be held.
func (r *Recorder) dropOldest() {
	var oldest key
	first := true
	for k := range r.pending {
		if first || k.start < oldest.start {
			oldest, first = k, false
		}
	}
	delete(r.pending, oldest)
	r.log.Warn("savings: store unreachable for long; dropping the oldest pending counts", "tenant", oldest.tenant)
}

// Record counts one request whose messages memory assembled.
func (r *Recorder) Record(tenant string, p memory.Prepared) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.entry(tenant)
	b.Requests++
	b.TokensOriginal += int64(p.TokensOriginal)
	b.TokensSent += int64(p.TokensSent)
}

// Repeated counts prompt tokens that repeat the previous request's prefix
// of the same conversation.
func (r *Recorder) Repeated(tenant string, tokens int) {
	if tokens <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry(tenant).TokensRepeated += int64(tokens)
}

// Cached counts prompt tokens the provider reported reading from its
// prompt cache.
func (r *Recorder) Cached(tenant string, tokens int) {
	if tokens <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry(tenant).TokensCached += int64(tokens)
}

// Degraded counts one request forwarded without memory.
func (r *Recorder) Degraded(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry(tenant).Degraded++
}

// Flush adds the pending counts to the store. When the store fails they are
// kept for the next Flush.
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	r.mu.Lock()
	taken := r.pending
	r.pending = map[key]*memory.SavingsBucket{}
	r.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	bs := make([]memory.SavingsBucket, 0, len(taken))
	for _, b := range taken {
		bs = append(bs, *b)
	}
	if err := r.store.AddSavings(ctx, bs); err != nil {
		r.mu.Lock()
		for k, b := range taken {
			if cur := r.pending[k]; cur != nil {
				cur.Requests += b.Requests
				cur.TokensOriginal += b.TokensOriginal
				cur.TokensSent += b.TokensSent
				cur.Degraded += b.Degraded
				cur.TokensRepeated += b.TokensRepeated
				cur.TokensCached += b.TokensCached
			} else if len(r.pending) < maxPending {
				r.pending[k] = b
			}
		}
		r.mu.Unlock()
		return fmt.Errorf("savings: flush: %w", err)
	}
	return nil
}

// Run flushes every interval (<= 0: DefaultFlushEvery) until ctx ends, then
// once more under a context that ctx's end does not cancel.
func (r *Recorder) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultFlushEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := r.Flush(ctx); err != nil {
				r.log.Warn("savings counts not stored; will retry", "error", err)
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := r.Flush(fctx); err != nil {
				r.log.Warn("savings counts lost at shutdown", "error", err)
			}
			return
		}
	}
}

// Wrap returns a Preparer that calls p and counts its outcome: a prepared
// request (delivered before its deadline) is recorded; a failure or a
// prepare that outlived its deadline, after which the proxy forwards without
// memory, counts as degraded.
func (r *Recorder) Wrap(p Preparer) Preparer { return &recording{p: p, r: r} }

// recording is the Preparer Wrap returns.
type recording struct {
	p Preparer
	r *Recorder
}

// Prepare calls the wrapped Preparer and records the outcome.
func (w *recording) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	p, err := w.p.Prepare(ctx, req)
	switch {
	case err != nil || ctx.Err() != nil || len(p.Messages) == 0:
		w.r.Degraded(req.Tenant)
	default:
		w.r.Record(req.Tenant, p)
	}
	return p, err
}
