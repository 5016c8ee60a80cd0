package recall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
)

// ErrEmbeddingLate reports that the vectors a caller waited for did not
// arrive by its embedding deadline (Embedder.Embed's by): the caller goes
// on without them (a full-text search in place of the vector one), its
// context alive. A Cached embedder's call goes on and fills the cache.
var ErrEmbeddingLate = errors.New("embedding late")

// DefaultFlightTimeout bounds one shared embedding call, which no
// request's deadline cuts short.
const DefaultFlightTimeout = 30 * time.Second

// DefaultEmbeddingBytes bounds an embedding cache (NewEmbeddingCache): 16
// MiB, about 7,400 vectors of the built-in encoder's 512 dimensions.
const DefaultEmbeddingBytes = 16 << 20

// EmbeddingKey names a vector in an EmbeddingCache: the model and
// dimension that made it, the owner it was embedded for (Owned; empty on
// nobody's behalf) and the ContentHash of its text. A kept vector is never
// stale; only its owner finds it, so that how fast a text embeds tells
// nobody what another owner embedded.
type EmbeddingKey struct {
	Model              string
	Dims               int
	Tenant, User, Hash string
}

// Owner is the user the vector was embedded for: their erasure drops it
// (Embeddings' Forget, as cache.Reads.DeleteUser calls it); everyone
// else's stay.
func (k EmbeddingKey) Owner() cache.Owner { return cache.Owner{Tenant: k.Tenant, User: k.User} }

// Owned is a text to embed on behalf of the user of a tenant whose query,
// fact or message it is.
type Owned struct{ Tenant, User, Text string }

// EmbeddingCache keeps vectors by EmbeddingKey (NewEmbeddingCache). Its
// values are shared: Cached clones what it puts and gets. Cached writes
// with PutSince the Epoch it read before embedding, so that a vector of a
// user erased while their text was embedded is not kept (cache.Cache's).
type EmbeddingCache interface {
	Get(key EmbeddingKey) ([]float32, bool)
	Epoch() uint64
	PutSince(epoch uint64, key EmbeddingKey, vec []float32) bool
}

// Embeddings is the embedding cache (NewEmbeddingCache).
type Embeddings struct {
	*cache.Cache[EmbeddingKey, []float32]
}

// NewEmbeddingCache returns an empty embedding cache bounded at max bytes
// (metrics as cache "embeddings") and in age at cache.UnrevisedMaxAge: a
// vector's key names its owner but no revision, so an erasure another
// process served reaches it within that age even without its notice.
func NewEmbeddingCache(max int) Embeddings {
	return Embeddings{cache.New("embeddings", max, func(k EmbeddingKey, v []float32) int {
		return len(k.Model) + len(k.Tenant) + len(k.User) + len(k.Hash) + 4*len(v)
	}).ExpireAfter(cache.UnrevisedMaxAge, time.Now)}
}

// Cached is an Embedder that embeds only the texts its cache lacks, each
// once per owner (EmbedOwned), in calls under their own context bounded by
// DefaultFlightTimeout: a caller that stops waiting neither cancels a call
// nor loses its result. A call carries its texts' owners' words to the
// inner embedder (a provider's, a third party): calls keeps it in flight
// per owner, so that an owner's erasure cancels it, and a text read
// before an erasure of its owner is never sent (see fly). It is safe for
// concurrent use.
type Cached struct {
	inner Embedder
	cache EmbeddingCache
	calls Calls

	// mu orders cache reads with flights: a flight leaves inflight once
	// its vectors are in the cache.
	mu       sync.Mutex
	inflight map[EmbeddingKey]*flight
}

// flight is one text being embedded for one owner, read by the caller
// that began it at epoch; done closes when vec or err is set.
type flight struct {
	text  string
	key   EmbeddingKey
	epoch uint64
	done  chan struct{}
	vec   []float32
	err   error
}

// Calls keeps the calls in flight that carry owners' text out, so that
// an owner's erasure cancels theirs (*cache.Calls): Begin returns the
// call's context and its end, or an error wrapping cache.ErrErased when
// the call must not be made.
type Calls interface {
	Begin(ctx context.Context, owners ...cache.Owner) (context.Context, func(), error)
}

// NewCached returns inner behind vectors, its calls kept in calls (nil:
// none kept, none refused).
func NewCached(inner Embedder, vectors EmbeddingCache, calls Calls) *Cached {
	if calls == nil {
		calls = (*cache.Calls)(nil) // keeps none, refuses none
	}
	return &Cached{inner: inner, cache: vectors, calls: calls, inflight: map[EmbeddingKey]*flight{}}
}

// Model returns the inner embedder's model.
func (c *Cached) Model() string { return c.inner.Model() }

// Dims returns the inner embedder's dimension.
func (c *Cached) Dims() int { return c.inner.Dims() }

// Embed is EmbedOwned of texts on nobody's behalf (`gateway reindex`,
// benchmarks), whose vectors no owner's call finds.
func (c *Cached) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	owned := make([]Owned, len(texts))
	for i, t := range texts {
		owned[i].Text = t
	}
	return c.EmbedOwned(ctx, owned, by)
}

// EmbedOwned returns one vector per text, from the cache where it has the
// text's owner's (one of another length than the model's is a miss); the
// rest are embedded, each distinct text of an owner once (joining a call
// in flight for that owner), and written back. It waits until ctx ends or,
// when by is not zero, until by passes (then ErrEmbeddingLate), which a
// call it starts passes on to the inner embedder.
func (c *Cached) EmbedOwned(ctx context.Context, texts []Owned, by time.Time) ([][]float32, error) {
	model, dims := c.inner.Model(), c.inner.Dims()
	out, waits := make([][]float32, len(texts)), make([]*flight, len(texts))
	var mine []*flight
	// The texts were read at ctx's epoch (an enrichment round's, taken
	// before it read its batch) or now. A flight joined keeps its own: the
	// vector is of the owner's text, which its caller read then.
	epoch := cache.EpochOf(ctx)
	c.mu.Lock()
	for i, t := range texts {
		k := EmbeddingKey{Model: model, Dims: dims, Tenant: t.Tenant, User: t.User, Hash: ContentHash(model, t.Text)}
		if v, ok := c.cache.Get(k); ok && len(v) == dims {
			out[i] = slices.Clone(v)
		} else if waits[i] = c.inflight[k]; waits[i] == nil {
			waits[i] = &flight{text: t.Text, key: k, epoch: epoch, done: make(chan struct{})}
			c.inflight[k], mine = waits[i], append(mine, waits[i])
		}
	}
	c.mu.Unlock()
	if !slices.ContainsFunc(waits, func(f *flight) bool { return f != nil }) {
		return out, nil // every vector from the cache: no deadline to arm
	}
	if len(mine) > 0 {
		go c.fly(context.WithoutCancel(ctx), mine, by)
	}
	wctx := ctx
	if !by.IsZero() {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadlineCause(ctx, by, ErrEmbeddingLate)
		defer cancel()
	}
	for i, f := range waits {
		if f == nil {
			continue
		}
		select {
		case <-f.done:
		case <-wctx.Done(): // ErrEmbeddingLate, or ctx's cause
			return nil, fmt.Errorf("embed %d texts: %w", len(texts), context.Cause(wctx))
		}
		if f.err != nil {
			return nil, f.err
		}
		out[i] = f.vec
	}
	return out, nil
}

// fly embeds the flights' texts under a context of its own, publishes the
// result, and caches the vectors of the model's dimension. The call is
// not made when an owner of one of the texts was erased since the
// flight's caller read it, and an owner's erasure cancels it in flight
// (c.calls): the flights then fail with an error wrapping
// cache.ErrErased (the other owners' too, who embed theirs again), or
// cache.ErrCleared when a clear of the calls refused or cancelled it
// (the enrichment round is retried under a fresh epoch).
func (c *Cached) fly(ctx context.Context, fs []*flight, by time.Time) {
	dims := c.inner.Dims()
	texts := make([]string, len(fs))
	owners := make([]cache.Owner, 0, len(fs))
	epoch := fs[0].epoch
	for j, f := range fs {
		texts[j] = f.text
		epoch = min(epoch, f.epoch)
		if o := f.key.Owner(); !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	vecs, err := c.embed(cache.WithEpoch(ctx, epoch), texts, owners, by)
	for j, f := range fs {
		if f.err = err; err == nil {
			f.vec = vecs[j]
		}
		close(f.done)
	}
	// Joinable until cached, so no request in between embeds them again.
	// Not kept when an erasure of the owner came since the flight's caller
	// read the text: its Forget ran before this write, and the vector
	// holds what the owner said.
	for _, f := range fs {
		if err == nil && len(f.vec) == dims {
			c.cache.PutSince(f.epoch, f.key, slices.Clone(f.vec))
		}
	}
	c.mu.Lock()
	for _, f := range fs {
		delete(c.inflight, f.key)
	}
	c.mu.Unlock()
}

// embed embeds texts, the owners' words read at ctx's epoch, with the
// inner embedder under DefaultFlightTimeout, kept in c.calls while it
// runs.
func (c *Cached) embed(ctx context.Context, texts []string, owners []cache.Owner, by time.Time) ([][]float32, error) {
	cctx, end, err := c.calls.Begin(ctx, owners...)
	if err != nil {
		return nil, fmt.Errorf("embed %d texts: %w", len(texts), err)
	}
	defer end()
	cctx, cancel := context.WithTimeout(cctx, DefaultFlightTimeout)
	defer cancel()
	vecs, err := c.inner.Embed(cctx, texts, by)
	if cause := context.Cause(cctx); err != nil && (errors.Is(cause, cache.ErrErased) || errors.Is(cause, cache.ErrCleared)) {
		return nil, fmt.Errorf("embed %d texts: %w", len(texts), cause)
	}
	return vecs, err
}
