package itemindex

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// SQLSearches are a store's searches in SQL alone, which a Searcher runs
// for a user too large for its Index (ErrTooBig).
type SQLSearches struct {
	// Vector ranks the user's items by cosine similarity to q.Embedding,
	// as Index.SearchVector does; q asks for something (contract.VectorQuery).
	Vector func(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	// Text ranks the user's items for terms (at least one, from q.Text)
	// and q.Related, as Index.SearchText does; q.Limit > 0.
	Text func(ctx context.Context, q memory.ItemQuery, terms []string) ([]memory.Item, error)
	// Common, when set, counts terms as Index.CommonTerms does; nil: no
	// term is known to be common.
	Common func(ctx context.Context, tenant, user string, terms []string, minDF int, frac float64) ([]string, error)
	// MaxQueryBytes, when > 0, bounds the query text split into terms.
	MaxQueryBytes int
}

// Searcher is a store's recall reads: its items ranked by vector and by
// text, the terms common in them, and the turns around hits. It answers
// from an Index and a Windows, kept in memory, and for a user too large
// for the Index from the store's own SQL. A store's SearchVector,
// SearchText, CommonTerms and MessagesAround are these.
type Searcher struct {
	index   *Index // nil: SQL alone
	windows *Windows
	sql     SQLSearches
}

// NewSearcher returns a Searcher over index and windows that falls back on
// sql. With a nil index every search runs in SQL (what bench/search
// measures); a nil windows finds no turns.
func NewSearcher(index *Index, windows *Windows, sql SQLSearches) Searcher {
	return Searcher{index: index, windows: windows, sql: sql}
}

// SearchVector ranks the user's items by cosine similarity to q.Embedding,
// by the contract (storetest.Knowledge): nothing (an empty slice) for a
// query without an embedding or a positive limit, memory.ErrInvalid for
// one whose Dims contradict its embedding.
func (s Searcher) SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	if ok, err := contract.VectorQuery(q); err != nil {
		return nil, wrap("search vector", err)
	} else if !ok {
		return []memory.Item{}, nil
	}
	err := ErrTooBig
	if s.index != nil {
		var items []memory.Item
		if items, err = s.index.SearchVector(ctx, q); err == nil {
			return items, nil
		}
	}
	if !errors.Is(err, ErrTooBig) {
		return nil, wrap("search vector", err)
	}
	items, err := s.sql.Vector(ctx, q)
	return items, wrap("search vector", err)
}

// SearchText ranks the user's items matching q.Text by Okapi BM25 over all
// of them, by the contract (storetest.RunRanking): the text is split into
// words (memory.QueryTerms), never read as query syntax. Nothing (an
// empty slice) for a text without words or a limit below 1.
func (s Searcher) SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	terms := memory.QueryTerms(truncate(q.Text, s.sql.MaxQueryBytes), MaxQueryTerms)
	if len(terms) == 0 || q.Limit <= 0 {
		return []memory.Item{}, nil
	}
	err := ErrTooBig
	if s.index != nil {
		var items []memory.Item
		if items, err = s.index.SearchText(ctx, q, terms); err == nil {
			return items, nil
		}
	}
	if !errors.Is(err, ErrTooBig) {
		return nil, wrap("search text", err)
	}
	items, err := s.sql.Text(ctx, q, terms)
	return items, wrap("search text", err)
}

// CommonTerms returns those of terms (words, as memory.QueryTerms gives
// them) found in at least minDF of the user's items and at least frac of
// them, in the order given: the words a query shares with most of the
// user's memory (speaker names, common words), which recall leaves out of
// its vector query. The counts are SearchText's: the Index's, or for a user
// too large for it SQLSearches.Common's (none without it).
func (s Searcher) CommonTerms(ctx context.Context, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	err := ErrTooBig
	if s.index != nil {
		var out []string
		if out, err = s.index.CommonTerms(ctx, tenant, user, terms, minDF, frac); err == nil {
			return out, nil
		}
	}
	if !errors.Is(err, ErrTooBig) {
		return nil, wrap("common terms", err)
	}
	if s.sql.Common == nil {
		return nil, nil // no statistics: nothing is known to be common
	}
	out, err := s.sql.Common(ctx, tenant, user, terms, minDF, frac)
	return out, wrap("common terms", err)
}

// MessagesAround returns the live messages around refs by the contract
// (storetest.RankingStore), as Windows.Around reads them.
func (s Searcher) MessagesAround(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
	if s.windows == nil {
		return []*memory.Message{}, nil
	}
	return s.windows.Around(ctx, tenant, user, refs, radius)
}

// wrap names the read that failed with err; nil stays nil.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// truncate cuts s to at most n bytes (n > 0) at a rune boundary.
func truncate(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
