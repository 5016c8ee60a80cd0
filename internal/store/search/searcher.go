// Package search answers a store's recall reads — its items ranked by
// vector and by text, the terms common in them, and the turns around hits
// — from the in-memory item index (internal/itemindex) when it keeps the
// user, and from the store's own SQL when the user is too large for it.
// The SQL stores' SearchVector, SearchText, CommonTerms and MessagesAround
// are a Searcher's; the ranking of those results, fusion included, is
// internal/engine/recall's.
package search

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// SQLSearches are a store's searches in SQL, which a Searcher runs for a
// user too large for its Index (itemindex.ErrTooBig): each either returns
// whole items (Vector, Text) or ranks the items' ids, whose rows the Index
// then reads through its item cache (RankVector, RankText). A Searcher
// without an Index needs Vector and Text.
type SQLSearches struct {
	// Vector ranks the user's items by cosine similarity to q.Embedding,
	// as itemindex.Index.SearchVector does; q asks for something
	// (contract.VectorQuery).
	Vector func(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	// RankVector, when Vector is nil, ranks Vector's items' ids.
	RankVector func(ctx context.Context, q memory.ItemQuery) ([]ranking.Scored, error)
	// Text ranks the user's items for terms (at least one, from q.Text,
	// which is cut to MaxQueryBytes) and q.Related, as
	// itemindex.Index.SearchText does; q.Limit > 0.
	Text func(ctx context.Context, q memory.ItemQuery, terms []string) ([]memory.Item, error)
	// RankText, when Text is nil, ranks Text's items' ids.
	RankText func(ctx context.Context, q memory.ItemQuery, terms []string) ([]ranking.Scored, error)
	// Common, when set, counts terms as itemindex.Index.CommonTerms does; nil: no
	// term is known to be common.
	Common func(ctx context.Context, tenant, user string, terms []string, minDF int, frac float64) ([]string, error)
	// MaxQueryBytes, when > 0, bounds the query text split into terms
	// and handed to Text.
	MaxQueryBytes int
	// Store names the store in the trace spans of SearchVector and
	// SearchText ("sqlite": sqlite.SearchVector).
	Store string
}

// Searcher is a store's recall reads: its items ranked by vector and by
// text, the terms common in them, and the turns around hits. It answers
// from an itemindex.Index, kept in memory, and for a user too large for it
// from the store's own SQL. A store embeds it: its SearchVector,
// SearchText, CommonTerms and MessagesAround are these.
type Searcher struct {
	index *itemindex.Index // nil: SQL alone
	sql   SQLSearches
	revs  func(ctx context.Context, tenant, user string) (memory.Revisions, error)
}

// NewSearcher returns a Searcher over index that falls back on sql. With a
// nil index every search runs in SQL (what bench/search measures) and no
// turns are found. What index keeps is keyed by the user's Revisions: the
// request's read, handed to each search (memory.ItemQuery.Revisions, the
// rev arguments), or read from revs when a caller hands none.
func NewSearcher(index *itemindex.Index, sql SQLSearches, revs func(ctx context.Context, tenant, user string) (memory.Revisions, error)) Searcher {
	return Searcher{index: index, sql: sql, revs: revs}
}

// revisions returns *rev, the user's Revisions as the caller's request
// read them, or reads them when rev is nil.
func (s Searcher) revisions(ctx context.Context, rev *memory.Revisions, tenant, user string) (memory.Revisions, error) {
	if rev != nil {
		return *rev, nil
	}
	r, err := s.revs(ctx, tenant, user)
	if err != nil {
		return memory.Revisions{}, fmt.Errorf("read revisions: %w", err)
	}
	return r, nil
}

// SearchVector ranks the user's items by cosine similarity to q.Embedding,
// by the contract (storetest.Knowledge): nothing (an empty slice) for a
// query without an embedding or a positive limit, memory.ErrInvalid for
// one whose Dims contradict its embedding.
func (s Searcher) SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	defer telemetry.Span(&ctx, s.sql.Store+".SearchVector")()
	if ok, err := contract.VectorQuery(q); err != nil {
		return nil, wrap("search vector", err)
	} else if !ok {
		return []memory.Item{}, nil
	}
	items, err := indexFirst(ctx, s, q.Revisions, q.Tenant, q.User,
		func(rev memory.Revisions) ([]memory.Item, error) { return s.index.SearchVector(ctx, rev, q) },
		func(rev memory.Revisions) ([]memory.Item, error) {
			if s.sql.Vector != nil {
				return s.sql.Vector(ctx, q)
			}
			ranked, err := s.sql.RankVector(ctx, q)
			if err != nil {
				return nil, err
			}
			return s.index.Items(ctx, rev, q.Tenant, q.User, ranked)
		})
	return items, wrap("search vector", err)
}

// SearchText ranks the user's items matching q.Text by Okapi BM25 over all
// of them, by the contract (storetest.RunRanking): the text is split into
// words (memory.QueryTerms), never read as query syntax. Nothing (an
// empty slice) for a text without words or a limit below 1.
func (s Searcher) SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	defer telemetry.Span(&ctx, s.sql.Store+".SearchText")()
	q.Text = memory.Truncate(q.Text, s.sql.MaxQueryBytes)
	terms := memory.QueryTerms(q.Text, itemindex.MaxQueryTerms)
	if len(terms) == 0 || q.Limit <= 0 {
		return []memory.Item{}, nil
	}
	items, err := indexFirst(ctx, s, q.Revisions, q.Tenant, q.User,
		func(rev memory.Revisions) ([]memory.Item, error) { return s.index.SearchText(ctx, rev, q, terms) },
		func(rev memory.Revisions) ([]memory.Item, error) {
			if s.sql.Text != nil {
				return s.sql.Text(ctx, q, terms)
			}
			ranked, err := s.sql.RankText(ctx, q, terms)
			if err != nil {
				return nil, err
			}
			return s.index.TextItems(ctx, rev, q, ranked)
		})
	return items, wrap("search text", err)
}

// CommonTerms returns those of terms (words, as memory.QueryTerms gives
// them) found in at least minDF of the user's items and at least frac of
// them, in the order given: the words a query shares with most of the
// user's memory (speaker names, common words), which recall leaves out of
// its vector query. The counts are SearchText's: the Index's, or for a user
// too large for it SQLSearches.Common's (none without it).
func (s Searcher) CommonTerms(ctx context.Context, rev *memory.Revisions, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	out, err := indexFirst(ctx, s, rev, tenant, user,
		func(r memory.Revisions) ([]string, error) {
			return s.index.CommonTerms(ctx, r, tenant, user, terms, minDF, frac)
		},
		func(memory.Revisions) ([]string, error) {
			if s.sql.Common == nil {
				return nil, nil // no statistics: nothing is known to be common
			}
			return s.sql.Common(ctx, tenant, user, terms, minDF, frac)
		})
	return out, wrap("common terms", err)
}

// indexFirst answers a read of the user from s's Index (fromIndex), and
// from the store's SQL (fromSQL) when s has no Index or the user is too
// large for it (itemindex.ErrTooBig); both are handed the user's
// Revisions (rev, or read when nil; none without an Index).
func indexFirst[T any](ctx context.Context, s Searcher, rev *memory.Revisions, tenant, user string,
	fromIndex, fromSQL func(memory.Revisions) (T, error)) (T, error) {
	var r memory.Revisions
	if s.index != nil {
		var err error
		if r, err = s.revisions(ctx, rev, tenant, user); err != nil {
			var none T
			return none, err
		}
		if out, err := fromIndex(r); !errors.Is(err, itemindex.ErrTooBig) {
			return out, err
		}
	}
	return fromSQL(r)
}

// MessagesAround returns the live messages around refs by the contract
// (storetest.RankingStore), as itemindex.Index.Around reads them.
func (s Searcher) MessagesAround(ctx context.Context, rev *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
	if s.index == nil || len(refs) == 0 || radius < 0 {
		return []*memory.Message{}, nil
	}
	r, err := s.revisions(ctx, rev, tenant, user)
	if err != nil {
		return nil, wrap("messages around", err)
	}
	return s.index.Around(ctx, r, tenant, user, refs, radius)
}

// Collectors returns the Prometheus collectors of the Searcher's index
// caches (see internal/engine/cache).
func (s Searcher) Collectors() []prometheus.Collector {
	if s.index == nil {
		return nil
	}
	return s.index.Collectors()
}

// wrap names the read that failed with err; nil stays nil.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
