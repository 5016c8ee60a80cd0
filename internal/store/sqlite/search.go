package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
	"github.com/memgate/memgate/internal/vec"
)

// textWindow is how many of the newest matching items SearchText ranks.
// make eval (about 400 items per user) scores the same at 300 as with no
// window, and a point lower at 100.
const textWindow = 300

// searchVectorSQL ranks SearchVector's items for a user too large for the
// index (search.SQLSearches.RankVector): the candidates' vectors are read
// from SQL and scored in place, with a top-k heap; the Index reads the
// winners' rows.
func (s *Store) searchVectorSQL(ctx context.Context, q memory.ItemQuery) ([]ranking.Scored, error) {
	qnorm := ranking.Norm(q.Embedding)
	if qnorm == 0 {
		return nil, nil
	}
	where, args := itemScope(q)
	args = append(args, q.Model, len(q.Embedding))
	top := make(ranking.TopK, 0, q.Limit+1)
	var id int64
	var blob sql.RawBytes
	err := eachRow(ctx, s.reads, `SELECT id, embedding FROM memory_items WHERE `+where+
		` AND model = ? AND dims = ? AND embedding IS NOT NULL`+notErasing("memory_items"), args, []any{&id, &blob}, func() error {
		if score, ok := vec.CosineBytes(q.Embedding, qnorm, blob); ok {
			top.Offer(ranking.Scored{ID: id, Score: score}, q.Limit)
		}
		return nil
	})
	return top.Sorted(), err
}

// searchTextWindow ranks SearchText's items for a user too large to index
// in memory (search.SQLSearches.RankText): FTS5 finds the newest textWindow
// matching items (without ranking), ranked here by Okapi BM25
// (ranking.TextRanker) over the user's items, a term's document frequency
// counted among the candidates (exact unless the window is full). Related
// terms (q.Related) score the candidates but do not select them (hundreds
// of them would fill the window). FTS5's own bm25() grew linearly with the
// history (10k items: ~5 ms per search); this does not. An older passage
// beyond the window is still found by SearchVector.
func (s *Store) searchTextWindow(ctx context.Context, q memory.ItemQuery, terms []string) ([]ranking.Scored, error) {
	where, args := itemScope(q)
	// The user is matched inside FTS5 (its user_id column), so only that
	// user's items are walked, and the terms ORed as quoted strings; user
	// ids (memory.ValidID) and words hold no quote characters, so quoting
	// needs no escaping. The WHERE clause below checks tenant and user.
	match := `user_id : "` + q.User + `" AND ("` + strings.Join(terms, `" OR "`) + `")`
	args = append([]any{match}, args...)
	args = append(args, textWindow)
	// The user's item count (inserts, as memory_item_revisions counts
	// them) stands for the corpus size in the terms' idf. It is read
	// before the matches: a query issued while rows hold a connection
	// waits for a second one, and with every reader doing that under load
	// the pool deadlocks until the contexts expire.
	var total int
	if err := s.reads.QueryRowContext(ctx, `SELECT added FROM memory_item_revisions WHERE tenant = ? AND user_id = ?`,
		q.Tenant, q.User).Scan(&total); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	r := ranking.NewTextRanker(terms, q.Related, total)
	var id int64
	var text sql.RawBytes
	if err := eachRow(ctx, s.reads, `SELECT memory_items.id, memory_items.text
		FROM memory_items_fts JOIN memory_items ON memory_items.id = memory_items_fts.rowid
		WHERE memory_items_fts MATCH ? AND `+where+notErasing("memory_items")+`
		ORDER BY memory_items_fts.rowid DESC LIMIT ?`, args, []any{&id, &text}, func() error { r.Add(id, text); return nil }); err != nil {
		return nil, err
	}
	return r.Best(q.Limit), nil
}

// itemScope returns the WHERE clause (on memory_items) and its arguments that
// scope a search to q's tenant, user, conversation and excluded refs.
func itemScope(q memory.ItemQuery) (string, []any) {
	where := `memory_items.tenant = ? AND memory_items.user_id = ?`
	args := []any{q.Tenant, q.User}
	if q.Conversation != "" {
		where += ` AND memory_items.conversation = ?`
		args = append(args, q.Conversation)
	}
	if len(q.ExcludeRefs) > 0 {
		where += ` AND memory_items.source NOT IN (SELECT value FROM json_each(?))`
		args = append(args, jsonArray(q.ExcludeRefs))
	}
	return where, args
}
