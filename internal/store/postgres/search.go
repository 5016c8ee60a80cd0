package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// HNSW search settings. ef_search bounds the candidate list of one index
// scan; iterative scans (pgvector 0.8) keep scanning when the tenant and user
// filters reject candidates, up to hnsw.max_scan_tuples.
const (
	minEFSearch = 40
	maxEFSearch = 1000
)

// searchVectorSQL returns the statement SearchVector runs for q, and its
// arguments. The dimension is a literal, not a parameter: the planner can use
// the partial expression indexes memory_items_embedding_384 and _512 only
// when the query repeats its expression (embedding::vector(384)) and its
// predicate (dims = 384) verbatim. Tenant and user filter the index scan itself.
func searchVectorSQL(q memory.ItemQuery, dims int) (string, []any) {
	args := []any{q.Tenant, q.User, pgvector.NewVector(q.Embedding), q.Limit}
	var where strings.Builder
	if q.Model != "" {
		args = append(args, q.Model)
		fmt.Fprintf(&where, " AND model = $%d", len(args))
	}
	if q.Conversation != "" {
		args = append(args, q.Conversation)
		fmt.Fprintf(&where, " AND conversation = $%d", len(args))
	}
	if len(q.ExcludeRefs) > 0 {
		args = append(args, q.ExcludeRefs)
		fmt.Fprintf(&where, " AND NOT (source = ANY($%d))", len(args))
	}
	d := strconv.Itoa(dims)
	sql := `SELECT ` + itemColumns + `, embedding::vector(` + d + `) <=> $3 AS distance, embedding
		FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND dims = ` + d + where.String() + `
		ORDER BY embedding::vector(` + d + `) <=> $3
		LIMIT $4`
	return sql, args
}

// SearchVector ranks the user's items by cosine similarity to q.Embedding,
// by the contract (storetest.Knowledge), each with its Embedding (recall
// compares the passages it returns with each other; read-only). The
// user's vectors are ranked exactly in memory (itemindex.Index); a user too
// large for the cache's share is searched in SQL (searchVectorSQLPath).
func (s *Store) SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	defer telemetry.Span(&ctx, "postgres.SearchVector")()
	if ok, err := contract.VectorQuery(q); !ok || err != nil {
		return nil, wrapSearch("vector", err)
	}
	items, err := s.index.SearchVector(ctx, q)
	if errors.Is(err, itemindex.ErrTooBig) {
		return s.searchVectorSQLPath(ctx, q)
	}
	return items, wrapSearch("vector", err)
}

// wrapSearch names the search (vector, text) that failed with err; nil
// stays nil.
func wrapSearch(kind string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: search %s: %w", kind, err)
}

// searchVectorSQLPath is SearchVector for a user too large to keep in
// memory, in one statement, whose access path the planner picks. When the
// user's items are few next to the table it reads them by the (tenant,
// user_id) btree index and ranks them exactly. For 384 and 512 dimensions
// (the local embedder's and the encoder's) it may
// instead scan the HNSW index; the scan is then iterative (relaxed order,
// ef_search at least the limit), so the tenant and user filters still fill
// the limit up to hnsw.max_scan_tuples, and like any HNSW search it is
// approximate.
func (s *Store) searchVectorSQLPath(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	dims := len(q.Embedding)
	sql, args := searchVectorSQL(q, dims)
	ef := min(max(minEFSearch, q.Limit), maxEFSearch)
	var items []memory.Item
	// One round trip: the transaction that scopes the settings, the
	// settings and the search go out as one pipelined batch (it was three:
	// BEGIN, the batch, COMMIT). When a statement fails the server skips the
	// rest, COMMIT included, and the pool discards the connection left in
	// the failed transaction.
	b := &pgx.Batch{}
	b.Queue(`BEGIN READ ONLY`)
	b.Queue(`SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
		set_config('hnsw.ef_search', $1, true)`, strconv.Itoa(ef))
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var err error
		items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Item, error) {
			var (
				dist float64
				vec  pgvector.Vector
			)
			it, err := scanItem(r, &dist, &vec)
			it.Score, it.Embedding = 1-dist, vec.Slice()
			return it, err
		})
		return err
	})
	b.Queue(`COMMIT`)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, wrapSearch("vector", unavailable(err))
	}
	// relaxed_order may return a few rows slightly out of order.
	slices.SortStableFunc(items, func(a, b memory.Item) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return items, nil
}

// SQLSearches runs a Store's searches in PostgreSQL alone, as for a user
// too large for the in-process index: bench/search measures these
// statements (exact, as the planner chooses, HNSW forced).
type SQLSearches struct{ s *Store }

// SQL returns s's searches without the in-process index.
func (s *Store) SQL() SQLSearches { return SQLSearches{s} }

// SearchVector is Store.SearchVector's statement.
func (x SQLSearches) SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	if ok, err := contract.VectorQuery(q); !ok || err != nil {
		return nil, wrapSearch("vector", err)
	}
	return x.s.searchVectorSQLPath(ctx, q)
}

// SearchText is Store.SearchText's statement.
func (x SQLSearches) SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	if len(textTerms(q)) == 0 || q.Limit <= 0 {
		return nil, nil
	}
	return x.s.searchTextSQLPath(ctx, q)
}
