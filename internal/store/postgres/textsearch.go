package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
)

// maxQueryBytes bounds the query text parsed into terms (the Searcher cuts
// it: search.SQLSearches.MaxQueryBytes).
const maxQueryBytes = 4096

// searchTextSQL returns the statement SearchText runs for q, and its
// arguments: Okapi BM25 (k1 = 1.2, b = 0.75) over the user's items, from
// the statistics memory_item_stats, memory_term_df and memory_item_terms
// hold (kept by triggers). A term's idf is ln((N - df + 0.5) / (df + 0.5))
// floored at 1e-6, as FTS5's; a term in half the items or more and in more
// than memory.CommonTermMinDF is left out (its long posting list never
// read) unless every term of the query is such a term. The query's terms
// are its lexemes in the 'simple' configuration, as the items', without
// stopwords unless nothing else is left; related terms (q.Related) add
// their idf times their highest weight, never for one of the query's own
// words nor when in 1/memory.RelatedCommonDivisor of the items. Ties rank
// the lower id first. Every lookup is by index, per term and per hit
// (LATERAL subqueries fenced with OFFSET 0, the item's ordered by its
// primary key): as plain joins, a planner misled by stale statistics (a
// new deployment's) scanned all of the user's items for every hit.
func searchTextSQL(q memory.ItemQuery, stop []string) (string, []any) {
	if stop == nil {
		stop = []string{} // NULL would match no lexeme
	}
	// Related terms are folded as the 'simple' configuration folds words.
	related, weights := make([]string, len(q.Related)), make([]float64, len(q.Related))
	for i, r := range q.Related {
		related[i], weights[i] = strings.ToLower(r.Term), r.Weight
	}
	where, args := itemScope(q, "m.", []any{q.Tenant, q.User, q.Text, stop, q.Limit, related, weights})
	// Without a conversation to stay within, only the best limit +
	// excluded refs items can make the answer: the join with memory_items
	// reads only those rows.
	top := ""
	if q.Conversation == "" {
		top = fmt.Sprintf(" ORDER BY score DESC, item_id LIMIT $5 + %d", len(q.ExcludeRefs))
	}
	// An item embedded with the query's model and dimensions comes with its
	// vector, as a vector search's do: recall compares the passages it
	// returns with each other, and would otherwise embed them again.
	vec := "NULL::vector"
	if q.Model != "" && q.Dims > 0 {
		args = append(args, q.Model)
		vec = fmt.Sprintf("CASE WHEN model = $%d AND dims = %d THEN embedding END", len(args), q.Dims)
	}
	sql := `WITH st AS (
			SELECT docs::float8 AS n, total_len::float8 / greatest(docs, 1) AS avgdl
			FROM memory_item_stats WHERE tenant = $1 AND user_id = $2
		), ot AS (
			SELECT DISTINCT lexeme AS term FROM unnest(to_tsvector('simple', $3))
			WHERE NOT (lexeme = ANY($4::text[]))
		), qt AS (
			SELECT term, 1::float8 AS weight, true AS own FROM ot
			UNION ALL
			SELECT r.term, max(r.weight), false FROM unnest($6::text[], $7::float8[]) r(term, weight)
			WHERE r.weight > 0 AND NOT EXISTS (SELECT 1 FROM ot WHERE ot.term = r.term)
			GROUP BY r.term
		), w AS (
			SELECT qt.term, qt.own, least(qt.weight, 1) * greatest(ln((st.n - f.df + 0.5) / (f.df + 0.5)), 1e-6) AS idf, NOT (f.df * 2 >= st.n AND f.df > ` + strconv.Itoa(memory.CommonTermMinDF) + `) AS selective,
				f.df * ` + strconv.Itoa(memory.RelatedCommonDivisor) + ` >= st.n AND f.df > ` + strconv.Itoa(memory.CommonTermMinDF) + ` AS broad
			FROM st, qt CROSS JOIN LATERAL (
				SELECT df FROM memory_term_df f WHERE f.tenant = $1 AND f.user_id = $2 AND f.term = qt.term OFFSET 0) f
		), u AS (
			SELECT term, idf FROM w
			WHERE (own AND (selective OR NOT EXISTS (SELECT 1 FROM w WHERE selective AND own))) OR NOT (own OR broad)
		), scored AS (
			SELECT p.item_id, sum(u.idf * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.len / st.avgdl))) AS score
			FROM st, u CROSS JOIN LATERAL (
				SELECT item_id, tf, len FROM memory_item_terms p
				WHERE p.tenant = $1 AND p.user_id = $2 AND p.term = u.term OFFSET 0) p
			GROUP BY p.item_id` + top + `
		)
		SELECT ` + itemColumns + `, score, ` + vec + ` FROM (
			SELECT m.*, s.score FROM scored s
			CROSS JOIN LATERAL (
				SELECT * FROM memory_items m WHERE m.tenant = $1 AND m.user_id = $2 AND m.id = s.item_id
				ORDER BY m.tenant, m.user_id, m.id LIMIT 1) m
			WHERE true` + where + `
			ORDER BY s.score DESC, m.id
			LIMIT $5
		) hits ORDER BY score DESC, id`
	return sql, args
}

// searchTextSQLPath is SearchText for a user too large to index in memory:
// one statement (searchTextSQL) ranks the user's postings.
func (s *Store) searchTextSQLPath(ctx context.Context, q memory.ItemQuery, _ []string) ([]memory.Item, error) {
	sql, args := searchTextSQL(q, memory.QueryStopwords(q.Text))
	return collect(ctx, s.pool, func(r pgx.CollectableRow) (memory.Item, error) {
		var score float64
		it, err := scanItemVector(r, &score)
		it.Score = score
		return it, err
	}, sql, args...)
}

// commonTermsSQL is CommonTerms for a user too large for the index: by
// the statistics of memory_term_df.
func (s *Store) commonTermsSQL(ctx context.Context, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	common, err := collect(ctx, s.pool, pgx.RowTo[string], `SELECT d.term FROM memory_item_stats st
		JOIN memory_term_df d ON d.tenant = st.tenant AND d.user_id = st.user_id
		WHERE st.tenant = $1 AND st.user_id = $2 AND d.term = ANY($3::text[])
			AND d.df >= $4 AND d.df >= $5 * st.docs`, tenant, user, terms, minDF, frac)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range terms {
		if slices.Contains(common, t) {
			out = append(out, t)
		}
	}
	return out, nil
}
