package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/search"
)

// indexSource is what the Store's itemindex.Index reads: the rows of
// memory_items, each read by the table's primary key, and the turns
// around recalled messages, kept under the user's messages_changed
// (migration 0011).
type indexSource struct{ pool *pgxpool.Pool }

var _ itemindex.Source = indexSource{}

// ItemRevisions reads the user's row of memory_item_revisions (zero when
// none), moved by the triggers of migrations 0010, 0011, 0021 and 0023 on
// every write of memory_items, messages, facts and summaries by any process,
// plus the counts the user's erasures carried into the user's tombstone
// (migration 0027), so they never go back.
func (s *Store) ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error) {
	var rev memory.Revisions
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(added), 0)::bigint, coalesce(sum(changed), 0)::bigint,
			coalesce(sum(dated), 0)::bigint, coalesce(sum(messages_changed), 0)::bigint, coalesce(sum(messages_added), 0)::bigint,
			coalesce(sum(facts_changed), 0)::bigint, coalesce(sum(summaries_changed), 0)::bigint FROM (
		SELECT added, changed, dated, messages_changed, messages_added, facts_changed, summaries_changed
			FROM memory_item_revisions WHERE tenant = $1 AND user_id = $2
		UNION ALL
		SELECT added, changed, dated, messages_changed, messages_added, facts_changed, summaries_changed
			FROM user_tombstones WHERE digest = memgate_user_tombstone($1, $2)) r`, tenant, user).Scan(&rev.Added, &rev.Changed, &rev.Dated, &rev.Messages, &rev.MessagesAdded,
		&rev.Facts, &rev.Summaries)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return memory.Revisions{}, unavailable(err)
	}
	return rev, nil
}

// Load reads key's texts (Dims 0) or vectors of ids above afterID, by id.
func (src indexSource) Load(ctx context.Context, key itemindex.Key, afterID int64, add func(id int64, conv, ref string, text []byte, vec []float32) error) error {
	var (
		id        int64
		conv, ref string
		text      []byte
		vec       pgvector.Vector
	)
	sql, args, dst := `SELECT id, coalesce(conversation, ''), source, content FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND id > $3`, []any{key.Tenant, key.User, afterID}, any(&text)
	if key.Dims > 0 {
		sql, dst = `SELECT id, coalesce(conversation, ''), source, embedding FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND id > $3 AND dims = $4 AND embedding IS NOT NULL`, &vec
		if args = append(args, key.Dims); key.Model != "" {
			sql += ` AND model = $5`
			args = append(args, key.Model)
		}
	}
	rows, err := src.pool.Query(ctx, sql+` ORDER BY id`, args...)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&id, &conv, &ref, dst}, func() error {
			return add(id, conv, ref, text, vec.Slice())
		})
	}
	return unavailable(err)
}

// LoadItems reads the user's items of ids, with their embeddings.
func (src indexSource) LoadItems(ctx context.Context, tenant, user string, ids []int64) ([]memory.Item, error) {
	return collect(ctx, src.pool, func(r pgx.CollectableRow) (memory.Item, error) { return scanItemVector(r) },
		`SELECT `+itemColumns+`, embedding FROM memory_items WHERE tenant = $1 AND user_id = $2 AND id = ANY($3)`, tenant, user, ids)
}

// LoadSaidAt reads the user's items' times said.
func (src indexSource) LoadSaidAt(ctx context.Context, tenant, user string, ids []int64) (map[int64]time.Time, error) {
	out, id, said := make(map[int64]time.Time, len(ids)), int64(0), time.Time{}
	rows, err := src.pool.Query(ctx, `SELECT id, coalesce(said_at, created_at) FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND id = ANY($3)`, tenant, user, ids)
	return out, eachRow(rows, err, "item times", []any{&id, &said}, func() { out[id] = said })
}

// ReadWindows reads the turns within radius of each of refs
// (itemindex.Source). Superseded turns are read too, and then left
// out, so a window ending on one counts as closed.
func (src indexSource) ReadWindows(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[itemindex.WindowKey][]memory.Message, map[itemindex.WindowKey]bool, error) {
	convs, keys := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		convs[i], keys[i] = r.Conversation, r.Key
	}
	// Each ref is looked up, and its neighbours read, by index (LATERAL,
	// fenced with OFFSET 0 so the planner cannot flatten it into joins):
	// as plain joins, a planner misled by stale statistics (a table filled
	// since its last ANALYZE) joined every message of the user with every
	// other, hundreds of milliseconds for a few hundred turns.
	rows, err := src.pool.Query(ctx, `
		SELECT h.key, h.seq, m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at,
			m.superseded_at IS NOT NULL, m.marked
		FROM (SELECT DISTINCT * FROM unnest($3::text[], $4::text[]) AS r(conversation, key)) r
		CROSS JOIN LATERAL (
			SELECT h.key, h.seq FROM messages h
			WHERE h.tenant = $1 AND h.user_id = $2 AND h.conversation = r.conversation AND h.key = r.key OFFSET 0) h
		CROSS JOIN LATERAL (
			SELECT m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at, m.superseded_at,
				CASE WHEN strpos(m.raw::text, '"`+memory.FailedField+`"') > 0 THEN m.raw::text END AS marked
			FROM messages m
			WHERE m.tenant = $1 AND m.user_id = $2 AND m.conversation = r.conversation
				AND m.seq BETWEEN h.seq - $5 AND h.seq + $5 OFFSET 0) m
		ORDER BY m.conversation, h.key, m.seq`, tenant, user, convs, keys, radius)
	wr := search.NewWindowReads(radius, len(refs))
	var (
		hitKey     string
		hitSeq     int64
		superseded bool
		marked     []byte
		m          = memory.Message{Tenant: tenant, User: user}
	)
	err = eachRow(rows, err, "messages around", []any{&hitKey, &hitSeq, &m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &m.Tokens, &m.CreatedAt, &superseded, &marked},
		func() { wr.Add(hitKey, hitSeq, m, superseded, marked) })
	return wr.Read, wr.Closed, err
}
