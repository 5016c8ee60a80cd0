// Package itemindex ranks a user's memory items in process, for the stores
// whose SearchVector and SearchText it serves (SQLite, PostgreSQL): it
// keeps, per user, the vectors of each model and dimension (exact cosine
// top-k), an inverted full-text index with the statistics Okapi BM25 needs
// (words split and folded as SQLite FTS5's unicode61 tokenizer does,
// related terms weighted), and the whole items searches return, in
// caches of internal/engine/cache (bounded in bytes, least recently used
// evicted first, instrumented).
//
// Everything is kept under the user's cache.Revisions, read once by the
// caller's request before its searches and handed to all of them and to
// the turns around their hits (Windows). The vectors and text index,
// extended in place after inserts, are checked against Added and Changed:
// Added moves on every insert of an item, Changed on every delete and
// every update of what a search ranks by (and whenever an insert cannot be
// read as the rows above the highest id already held). Same counts: the
// index is current; only Added moved: the rows with ids above the highest
// held are read and appended; Changed moved: everything is read again. The
// whole items are kept under Items (Changed plus Dated, which an update of
// an item's time said alone moves: a fact stated again, turn after turn,
// has its items read again but never the user's vectors and text index).
// The counters never go back (an erasure moves Changed and keeps the
// user's row), so a cache read before a change can never pass for a later
// state.
//
// A store supplies the reads through the small interfaces below
// (VectorLoader, TextLoader, ItemLoader); users too large
// for their share of a cache get ErrTooBig, and the store searches them in
// SQL instead (internal/store/search picks the index or the SQL).
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

// VectorLoader reads a user's vectors of key's model and dimension.
type VectorLoader interface {
	// LoadVectors calls add, in id order, for each of key's items (tenant,
	// user, model and Dims; any model when Model is "") with a vector of
	// key.Dims dimensions and an id above afterID, with the item's
	// conversation ("" for none), ref and vector (valid during the call
	// only). It stops at add's first error and returns it.
	LoadVectors(ctx context.Context, key Key, afterID int64, add func(id int64, conv, ref string, vec []float32) error) error
}

// TextLoader reads a user's texts.
type TextLoader interface {
	// LoadTexts calls add, in id order, for each of the user's items with
	// an id above afterID, with its conversation ("" for none), ref and
	// text (valid during the call only). It stops at add's first error and
	// returns it.
	LoadTexts(ctx context.Context, tenant, user string, afterID int64, add func(id int64, conv, ref string, text []byte) error) error
}

// ItemLoader reads whole items.
type ItemLoader interface {
	// LoadItems returns the items of ids that exist, in any order, each
	// with its embedding (nil when none). It may return another user's
	// items for ids that are not the user's: they are dropped.
	LoadItems(ctx context.Context, tenant, user string, ids []int64) ([]memory.Item, error)
}

// Source is every read an Index makes of its store.
type Source interface {
	VectorLoader
	TextLoader
	ItemLoader
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

// DefaultLimits are 128 MiB of vectors (about 85,000 items of 384
// dimensions; a user of more than about 21,000 such items, or 5,000 of
// 1,536, is searched in SQL), 128 MiB of full-text indexes (a user of
// more than about 250,000 items of twenty words is searched in SQL) and 32
// MiB of items (about 20,000 of 384 dimensions).
var DefaultLimits = Limits{Vectors: 128 << 20, Texts: 128 << 20, Items: 32 << 20}

// Index ranks users' items from memory, reading its Source only for what
// changed since it last looked. It is safe for concurrent use.
type Index struct {
	src     Source
	vectors slots[*vecSet]
	texts   slots[*textIndex]
	items   *cache.Cache[itemKey, memory.Item]
}

// New returns an empty Index reading src, bounded by lim.
func New(src Source, lim Limits) *Index {
	return &Index{src: src, vectors: newSlots[*vecSet]("vectors", lim.Vectors),
		texts: newSlots[*textIndex]("texts", lim.Texts), items: newItemCache(lim.Items)}
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
// keep.
//
// It keeps the vectors under rev, the user's Revisions read once by the
// caller's request before, and after inserts reads only the new rows; the scoring visits every vector of the user (about 0.1 µs per item
// of 384 dimensions).
func (x *Index) SearchVector(ctx context.Context, rev cache.Revisions, q memory.ItemQuery) ([]memory.Item, error) {
	qnorm := ranking.Norm(q.Embedding)
	if qnorm == 0 || q.Limit <= 0 {
		return []memory.Item{}, nil
	}
	set, err := x.userVectors(ctx, rev, Key{Tenant: q.Tenant, User: q.User, Model: q.Model, Dims: len(q.Embedding)})
	if err != nil {
		return nil, err
	}
	return x.Items(ctx, rev, q.Tenant, q.User, searchSet(set, q, qnorm))
}

// SearchText ranks the user's items sharing a word with terms (query
// words, as memory.QueryTerms gives them) or q.Related by Okapi BM25 over
// all of the user's items (see ranking.TextIndex.Search; Score > 0, higher is
// better), best first, up to q.Limit, honouring q.Conversation and
// q.ExcludeRefs. An item embedded with q.Model and q.Dims comes with its
// Embedding (read-only; see TextItems). It returns ErrTooBig for a user too large to
// index in memory.
func (x *Index) SearchText(ctx context.Context, rev cache.Revisions, q memory.ItemQuery, terms []string) ([]memory.Item, error) {
	if len(terms) == 0 || q.Limit <= 0 {
		return []memory.Item{}, nil
	}
	var best []ranking.Scored
	err := x.withTextIndex(ctx, rev, q.Tenant, q.User, func(t *textIndex) {
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

// TextItems returns the whole items of ranked, the user's items a text
// search for q ranked (SearchText, or a store's own ranking for a user too
// large to index in memory), as SearchText returns them: in ranked's
// order, with their scores, an item embedded with q.Model and q.Dims with
// its Embedding (the others, and all when q names no model, without: a
// text search's hits come with the vectors recall can compare with each
// other, never with another model's). Ids no longer found are skipped.
func (x *Index) TextItems(ctx context.Context, rev cache.Revisions, q memory.ItemQuery, ranked []ranking.Scored) ([]memory.Item, error) {
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
func (x *Index) CommonTerms(ctx context.Context, rev cache.Revisions, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	var out []string
	err := x.withTextIndex(ctx, rev, tenant, user, func(t *textIndex) {
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

// Items returns the whole items of ranked, ids of the user's items ranked
// by a search as of rev (SearchVector, SearchText, or a store's own for a
// user too large to keep), in ranked's order with their scores: the items
// the cache holds at rev's Items count come from memory, the others from
// the Source (and are then kept). Ids no longer found, or not the user's,
// are skipped. The embeddings are the cache's own (read-only).
func (x *Index) Items(ctx context.Context, rev cache.Revisions, tenant, user string, ranked []ranking.Scored) ([]memory.Item, error) {
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
			it.Score = 0
			x.items.Put(itemKey{tenant, user, at, it.ID}, it)
			for i, r := range ranked {
				if !held[i] && r.ID == it.ID {
					items[i], held[i] = it, true
				}
			}
		}
	}
	// In rank order, with their scores; ids missing (deleted since they were
	// ranked) are skipped. The embeddings are the cache's own, capped at
	// their length (memory.Item.Embedding: read-only): copying them was a
	// third of the bytes a memory-on request allocated.
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
