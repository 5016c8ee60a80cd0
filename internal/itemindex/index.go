// Package itemindex ranks a user's memory items in process for the SQL
// stores' SearchVector and SearchText, and keeps the turns around recalled
// messages, in internal/engine/cache caches under the user's
// memory.Revisions, read once by the caller's request. The vectors (per
// model and dimension) and the full-text index are current while Added
// (moved by every insert) and Changed (every delete, every update of what
// a search ranks by, an insert not above the highest id held) stand; when
// only Added moved, the rows above the highest id held are appended; else
// they are read again. Whole items are kept under Changed, their SaidAt
// under Dated (a fact stated again has only its times read again); closed
// windows of turns under Messages (every update and delete of the user's
// messages: a new one takes a seq above every stored one). The counters
// never go back, so nothing read before a change passes for a later state.
// A user past a quarter of a cache's bound gets ErrTooBig and is searched
// in SQL (internal/store/search).
package itemindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
)

// MaxQueryTerms bounds how many distinct words of a text query the stores
// search.
const MaxQueryTerms = 64

// ErrTooBig reports a user whose vectors or full-text index exceed a
// quarter of their cache's bound: the store searches them by its own means.
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
	// LoadSaidAt returns the SaidAt of the user's items of ids that exist.
	LoadSaidAt(ctx context.Context, tenant, user string, ids []int64) (map[int64]time.Time, error)
	// ReadWindows reads, for each of refs that names a stored message of
	// the user, the live turns within radius of it (no superseded messages
	// nor replies the upstream broke off; Raw empty) by Seq, nil when none,
	// and whether the window is closed (its last seq is stored). Refs
	// naming no stored message are absent.
	ReadWindows(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) (read map[WindowKey][]memory.Message, closed map[WindowKey]bool, err error)
}

// Limits bound an Index's caches, in bytes, over all users: vectors,
// full-text indexes, whole items and turns (Around).
type Limits struct{ Vectors, Texts, Items, Windows int }

// DefaultLimits are 128 MiB of vectors (a user's share: about 20,000 items
// of 384 dimensions), 128 MiB of full-text indexes (about 250,000 items of
// twenty words), 32 MiB of items and 16 MiB of turns (30,000 of 300 bytes).
var DefaultLimits = Limits{Vectors: 128 << 20, Texts: 128 << 20, Items: 32 << 20, Windows: 16 << 20}

// Index ranks users' items from memory, and keeps the turns around them,
// reading its Source only for what changed since it last looked. It is
// safe for concurrent use.
type Index struct {
	src     Source
	vectors slots[vecSet, *vecSet]
	texts   slots[textIndex, *textIndex]
	items   *cache.Cache[cache.Key[int64], heldItem]
	windows *cache.Cache[cache.Key[WindowKey], []memory.Message]
}

// New returns an empty Index reading src, bounded by lim.
func New(src Source, lim Limits) *Index {
	return &Index{src: src, vectors: newSlots[vecSet]("vectors", lim.Vectors),
		texts: newSlots[textIndex]("texts", lim.Texts), items: cache.New("items", lim.Items, itemSize),
		windows: cache.New("windows", lim.Windows, windowSize)}
}

// VectorUsage reports the vector sets (user, model, dims) held and their bytes.
func (x *Index) VectorUsage() (keys, bytes int) { return x.vectors.Usage() }

// Forget drops what x holds of the user (erased): nothing waits for eviction.
func (x *Index) Forget(tenant, user string) {
	x.vectors.Forget(tenant, user)
	x.texts.Forget(tenant, user)
	x.items.Forget(tenant, user)
	x.windows.Forget(tenant, user)
}

// Collectors returns the Prometheus collectors of x's caches.
func (x *Index) Collectors() []prometheus.Collector {
	return slices.Concat(x.vectors.Collectors(), x.texts.Collectors(), x.items.Collectors(), x.windows.Collectors())
}

// SearchVector ranks the user's items embedded with q.Model (any model
// when "") and len(q.Embedding) dimensions by cosine similarity to
// q.Embedding (Score, in [-1, 1]), best first (ties: lower id first), up
// to q.Limit, honouring q.Conversation and q.ExcludeRefs, each with its
// Embedding (read-only: see memory.Item). A stored vector of length 0
// never matches; a zero query, or Limit <= 0, finds nothing; a user too
// large to keep is ErrTooBig. It visits every vector of the user.
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

// SearchText ranks the user's items sharing a word with terms (as
// memory.QueryTerms gives them) or q.Related by Okapi BM25 over all of
// them (Score > 0), best first, up to q.Limit, honouring q.Conversation
// and q.ExcludeRefs, with embeddings as TextItems gives them; a user too
// large to index is ErrTooBig.
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

// TextItems returns Items of ranked with only the embeddings of q.Model and
// q.Dims (none when q names no model): recall compares one model's vectors.
func (x *Index) TextItems(ctx context.Context, rev memory.Revisions, q memory.ItemQuery, ranked []ranking.Scored) ([]memory.Item, error) {
	items, err := x.Items(ctx, rev, q.Tenant, q.User, ranked)
	for i := range items { // none on an error
		if q.Model == "" || items[i].Model != q.Model || items[i].Dims != q.Dims {
			items[i].Embedding = nil
		}
	}
	return items, err
}

// CommonTerms returns those of terms (words, as memory.QueryTerms gives
// them) found in at least minDF of the user's items and at least frac of
// them, in the order given (speaker names, common words); a user too large
// to index is ErrTooBig.
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
	return out, err // nil on an error: fn did not run
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

// heldItem is an item as kept, its SaidAt read at Revisions.Dated dated.
type heldItem struct {
	memory.Item
	dated int64
}

// Items returns the whole items of ranked (the user's items a search
// ranked as of rev), in ranked's order with their scores, from memory when
// held at rev's Changed count (their SaidAt read again when rev's Dated
// moved), else from the Source (then kept); ids no longer found, or not
// the user's, are skipped. The embeddings are the cache's own (read-only).
func (x *Index) Items(ctx context.Context, rev memory.Revisions, tenant, user string, ranked []ranking.Scored) ([]memory.Item, error) {
	key := func(id int64) cache.Key[int64] {
		return cache.Key[int64]{Tenant: tenant, User: user, Rev: rev.Changed, Of: id}
	}
	// What is read after an erasure's Forget began is not kept (PutSince).
	epoch := x.items.Epoch()
	items, held := make([]memory.Item, len(ranked)), make([]bool, len(ranked))
	var missing, redate []int64
	for i, r := range ranked {
		h, ok := x.items.Get(key(r.ID))
		items[i], held[i] = h.Item, ok && h.dated == rev.Dated
		if !ok {
			missing = append(missing, r.ID)
		} else if !held[i] {
			redate = append(redate, r.ID)
		}
	}
	if len(redate) > 0 {
		times, err := x.src.LoadSaidAt(ctx, tenant, user, redate)
		if err != nil {
			return nil, err
		}
		for i, r := range ranked {
			if held[i] || items[i].ID != r.ID {
				continue // current, or not held at all
			}
			if said, ok := times[r.ID]; ok {
				items[i].SaidAt, held[i] = said, true
				x.items.PutSince(epoch, key(r.ID), heldItem{items[i], rev.Dated})
			} else {
				missing = append(missing, r.ID) // gone (read as of a later change)
			}
		}
	}
	if len(missing) > 0 {
		read, err := x.src.LoadItems(ctx, tenant, user, missing)
		if err != nil {
			return nil, fmt.Errorf("load items: %w", err)
		}
		for _, it := range read {
			if it.Tenant != tenant || it.User != user {
				continue // another user's row (an id reused after a delete)
			}
			x.items.PutSince(epoch, key(it.ID), heldItem{it, rev.Dated})
			for i, r := range ranked {
				if !held[i] && r.ID == it.ID {
					items[i], held[i] = it, true
				}
			}
		}
	}
	out := items[:0]
	for i, ok := range held {
		if ok {
			it := items[i]
			// Capped, not copied: a third of a memory-on request's bytes.
			it.Score, it.Embedding = ranked[i].Score, slices.Clip(it.Embedding)
			out = append(out, it)
		}
	}
	return out, nil
}

// itemSize is roughly what one cached item holds in memory, in bytes.
func itemSize(_ cache.Key[int64], it heldItem) int {
	return 32 + len(it.Conversation) + len(it.Kind) + len(it.Ref) + len(it.Text) + len(it.Model) + 4*len(it.Embedding)
}
