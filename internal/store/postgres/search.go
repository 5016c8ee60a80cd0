package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/search"
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
	model := ""
	if q.Model != "" {
		args = append(args, q.Model)
		model = fmt.Sprintf(" AND model = $%d", len(args))
	}
	where, args := itemScope(q, "", args)
	d := strconv.Itoa(dims)
	sql := `SELECT ` + itemColumns + `, embedding::vector(` + d + `) <=> $3 AS distance, embedding
		FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND dims = ` + d + model + where + `
		ORDER BY embedding::vector(` + d + `) <=> $3
		LIMIT $4`
	return sql, args
}

// itemScope returns the conditions (on the columns of table alias a, "" for
// none) that keep a search within q's conversation and out of its excluded
// refs, and args with the parameters they use appended.
func itemScope(q memory.ItemQuery, a string, args []any) (string, []any) {
	var where strings.Builder
	if q.Conversation != "" {
		args = append(args, q.Conversation)
		fmt.Fprintf(&where, " AND %sconversation = $%d", a, len(args))
	}
	if len(q.ExcludeRefs) > 0 {
		args = append(args, q.ExcludeRefs)
		fmt.Fprintf(&where, " AND NOT (%ssource = ANY($%d))", a, len(args))
	}
	return where.String(), args
}

// SQL returns s's searches in PostgreSQL alone, as for a user too large
// for the in-process index: bench/search measures these statements
// (exact, as the planner chooses, HNSW forced).
func (s *Store) SQL() search.Searcher {
	return search.NewSearcher(nil, s.sqlSearches(), nil)
}

// sqlSearches are the Store's searches in SQL alone.
func (s *Store) sqlSearches() search.SQLSearches {
	return search.SQLSearches{Vector: s.searchVectorSQLPath, Text: s.searchTextSQLPath,
		Common: s.commonTermsSQL, MaxQueryBytes: maxQueryBytes, Store: "postgres"}
}

// searchVectorSQLPath is SearchVector for a user too large to keep in
// memory, in one statement, whose access path the planner picks. When the
// user's items are few next to the table it reads them by the (tenant,
// user_id) btree index and ranks them exactly. For 384 and 512 dimensions
// (the local embedder's and the encoder's) it may instead scan the HNSW
// index; the scan is then iterative (relaxed order, ef_search at least the
// limit), so the tenant and user filters still fill the limit up to
// hnsw.max_scan_tuples, and like any HNSW search it is approximate.
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
			var dist float64
			it, err := scanItemVector(r, &dist)
			it.Score = 1 - dist
			return it, err
		})
		return err
	})
	b.Queue(`COMMIT`)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, unavailable(err)
	}
	// relaxed_order may return a few rows slightly out of order.
	slices.SortStableFunc(items, func(a, b memory.Item) int { return cmp.Compare(b.Score, a.Score) })
	return items, nil
}
