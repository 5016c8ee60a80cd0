// Package itemindex ranks a user's memory items in process for the SQL
// stores' SearchVector and SearchText: per user, the vectors of each model
// and dimension (exact cosine top-k), an inverted full-text index for Okapi
// BM25 (ranking.TextIndex), and the whole items searches return, in
// internal/engine/cache caches.
//
// Everything is kept under the user's memory.Revisions, read once by the
// caller's request before its searches (and the turns around their hits,
// Windows). The vectors and text index are checked against Added (moved by
// every insert) and Changed (every delete, every update of what a search
// ranks by, and an insert that is not above the highest id held): same
// counts, the index is current; only Added moved, the rows above the
// highest id held are appended; Changed moved, everything is read again.
// Whole items are kept under Items (Changed plus Dated, which an update of
// an item's time said alone moves: a fact stated again has its items read
// again, never the user's vectors and text index). The counters never go
// back, so a cache read before a change never passes for a later state.
//
// A store supplies the reads (Source); a user too large for their share of
// a cache gets ErrTooBig and is searched in SQL (internal/store/search).
package itemindex

import (
	"context"
	"errors"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
)

// MaxQueryTerms bounds how many distinct words of a text query the stores
// search.
const MaxQueryTerms = 64

// ErrTooBig reports a user whose vectors or full-text index are not kept
// in memory: they exceed a quarter of their cache's bound. The store then
// searches the user by its own means.
var ErrTooBig = errors.New("itemindex: user too large for the cache's share")

// Source is every read an Index makes of its store.
type Source interface {
	// Load calls add, in id order, for each of key's items with an id above
	// afterID: with Dims 0, every item of the user (tenant and user) with
	// its text; else each with a vector of key.Dims dimensions and of
	// key.Model (any model when ""), with that vector. Each comes with its
	// conversation ("" for none) and ref; text and vector are valid during
	// the call only. It stops at add's first error and returns it.
	Load(ctx context.Context, key Key, afterID int64, add func(id int64, conv, ref string, text []byte, vec []float32) error) error
	// LoadItems returns the items of ids that exist, in any order, each
	// with its embedding (nil when none). It may return another user's
	// items for ids that are not the user's: they are dropped.
	LoadItems(ctx context.Context, tenant, user string, ids []int64) ([]memory.Item, error)
}

// Limits bound an Index's caches, in bytes, over all users.
type Limits struct {
	// Vectors bounds the vectors kept for SearchVector; a user whose
	// vectors exceed a quarter of it is not kept (ErrTooBig).
	Vectors int
	// Texts bounds the full-text indexes kept for SearchText; a user whose
	// index exceeds a quarter of it is not kept (ErrTooBig).
	Texts int
	// Items bounds the whole items kept for the searches' results.
	Items int
}

// DefaultLimits are 128 MiB of vectors (a user of more than about 21,000
// items of 384 dimensions is searched in SQL), 128 MiB of full-text indexes
// (about 250,000 items of twenty words) and 32 MiB of items.
var DefaultLimits = Limits{Vectors: 128 << 20, Texts: 128 << 20, Items: 32 << 20}

// Index ranks users' items from memory, reading its Source only for what
// changed since it last looked. It is safe for concurrent use.
type Index struct {
	src     Source
	vectors slots[vecSet, *vecSet]
	texts   slots[textIndex, *textIndex]
	// items are the items searches return, so that a search ranked from
	// memory does not read its best items' rows again: a warm
	// conversation's recall finds mostly the same items request after
	// request.
	items *cache.Cache[itemKey, memory.Item]
}

// New returns an empty Index reading src, bounded by lim.
func New(src Source, lim Limits) *Index {
	return &Index{src: src, vectors: newSlots[vecSet]("vectors", lim.Vectors),
		texts: newSlots[textIndex]("texts", lim.Texts), items: cache.New("items", lim.Items, itemSize)}
}

// VectorUsage reports how many keys (users, models and dimensions) the
// vector cache holds and the bytes it accounts for them.
func (x *Index) VectorUsage() (keys, bytes int) { return x.vectors.Usage() }

// Collectors returns the Prometheus collectors of x's caches.
func (x *Index) Collectors() []prometheus.Collector {
	return slices.Concat(x.vectors.Collectors(), x.texts.Collectors(), x.items.Collectors())
}

// SearchVector ranks the user's items embedded with q.Model (any model
// when "") and len(q.Embedding) dimensions by cosine similarity to
// q.Embedding (Score = similarity, in [-1, 1]), best first (ties: lower id
// first), up to q.Limit, honouring q.Conversation and q.ExcludeRefs; a
// stored vector of length 0 never matches. Each item comes with its
// Embedding (read-only: see memory.Item). An empty or zero embedding, or
// Limit <= 0, finds nothing. It returns ErrTooBig for a user too large to
// keep. The scoring visits every vector of the user (about 0.1 µs per item
// of 384 dimensions).
func (x *Index) SearchVector(ctx context.Context, rev memory.Revisions, q memory.ItemQuery) ([]memory.Item, error) {
	qnorm := ranking.Norm(q.Embedding)
	if qnorm == 0 || q.Limit <= 0 {
		return []memory.Item{}, nil
	}
	var set *vecSet
	key := Key{Tenant: q.Tenant, User: q.User, Model: q.Model, Dims: len(q.Embedding)}
	if err := x.vectors.with(ctx, x.src, key, rev, func(s *vecSet) { set = s }); err != nil {
		return nil, err
	}
	return x.Items(ctx, rev, q.Tenant, q.User, searchSet(set, q, qnorm))
}

// SearchText ranks the user's items sharing a word with terms (query
// words, as memory.QueryTerms gives them) or q.Related by Okapi BM25 over
// all of the user's items (ranking.TextIndex.Search; Score > 0), best
// first, up to q.Limit, honouring q.Conversation and q.ExcludeRefs, with
// embeddings as TextItems gives them. It returns ErrTooBig for a user too
// large to index in memory.
func (x *Index) SearchText(ctx context.Context, rev memory.Revisions, q memory.ItemQuery, terms []string) ([]memory.Item, error) {
	if len(terms) == 0 || q.Limit <= 0 {
		return []memory.Item{}, nil
	}
	var best []ranking.Scored
	err := x.texts.with(ctx, x.src, Key{Tenant: q.Tenant, User: q.User}, rev, func(t *textIndex) {
		excluded := refSet(q.ExcludeRefs)
		best = t.Search(t.ids, terms, q.Related, q.Limit, func(d int32) bool {
			return (q.Conversation == "" || t.convs[d] == q.Conversation) && !excluded[t.refs[d]]
		})
	})
	if err != nil {
		return nil, err
	}
	return x.TextItems(ctx, rev, q, best)
}

// TextItems returns the whole items of ranked, as a text search for q
// returns them (Items): only an item embedded with q.Model and q.Dims comes
// with its Embedding (none when q names no model), so recall compares only
// vectors of one model.
func (x *Index) TextItems(ctx context.Context, rev memory.Revisions, q memory.ItemQuery, ranked []ranking.Scored) ([]memory.Item, error) {
	items, err := x.Items(ctx, rev, q.Tenant, q.User, ranked)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if q.Model == "" || items[i].Model != q.Model || items[i].Dims != q.Dims {
			items[i].Embedding = nil
		}
	}
	return items, nil
}

// CommonTerms returns those of terms (words, as memory.QueryTerms gives
// them) found in at least minDF of the user's items and at least frac of
// them, in the order given: the words a query shares with most of the
// user's memory (speaker names, common words). It returns ErrTooBig for a
// user too large to index in memory.
func (x *Index) CommonTerms(ctx context.Context, rev memory.Revisions, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	var out []string
	err := x.texts.with(ctx, x.src, Key{Tenant: tenant, User: user}, rev, func(t *textIndex) {
		for _, w := range terms {
			df := t.DocFreq(ranking.FoldWord(w))
			if df > 0 && df >= minDF && float64(df) >= frac*float64(len(t.ids)) {
				out = append(out, w)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// refSet is refs as a set (nil when empty).
func refSet(refs []string) map[string]bool {
	if len(refs) == 0 {
		return nil
	}
	set := make(map[string]bool, len(refs))
	for _, r := range refs {
		set[r] = true
	}
	return set
}

// Items returns the whole items of ranked (the user's items a search
// ranked as of rev), in ranked's order with their scores: from memory when
// held at rev's Items count, else from the Source (then kept). Ids no
// longer found, or not the user's, are skipped. The embeddings are the
// cache's own (read-only).
func (x *Index) Items(ctx context.Context, rev memory.Revisions, tenant, user string, ranked []ranking.Scored) ([]memory.Item, error) {
	at := rev.Items()
	items, held := make([]memory.Item, len(ranked)), make([]bool, len(ranked))
	var missing []int64
	for i, r := range ranked {
		if items[i], held[i] = x.items.Get(itemKey{tenant, user, at, r.ID}); !held[i] {
			missing = append(missing, r.ID)
		}
	}
	if len(missing) > 0 {
		read, err := x.src.LoadItems(ctx, tenant, user, missing)
		if err != nil {
			return nil, err
		}
		for _, it := range read {
			// The ranking is the user's; a row of another user (an id
			// reused after a delete) is never theirs to see.
			if it.Tenant != tenant || it.User != user {
				continue
			}
			x.items.Put(itemKey{tenant, user, at, it.ID}, it)
			for i, r := range ranked {
				if !held[i] && r.ID == it.ID {
					items[i], held[i] = it, true
				}
			}
		}
	}
	// The embeddings are the cache's own, capped at their length: copying
	// them was a third of the bytes a memory-on request allocated.
	out := items[:0]
	for i, ok := range held {
		if ok {
			it := items[i]
			it.Score = ranked[i].Score
			it.Embedding = it.Embedding[:len(it.Embedding):len(it.Embedding)]
			out = append(out, it)
		}
	}
	return out, nil
}
