package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// indexSource is what the Store's itemindex.Index reads: the rows of
// memory_items, each read by the table's primary key.
type indexSource struct{ pool *pgxpool.Pool }

var _ itemindex.Source = indexSource{}

// ItemRevisions reads the user's row of memory_item_revisions (zero when
// none): the counters the triggers of migrations 0010, 0011, 0021 and 0023 move
// on every write of memory_items, messages, facts and summaries, by any
// process sharing the database.
func (s *Store) ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error) {
	var rev memory.Revisions
	err := s.pool.QueryRow(ctx, `SELECT added, changed, dated, messages_changed, messages_added,
			facts_changed, summaries_changed FROM memory_item_revisions
		WHERE tenant = $1 AND user_id = $2`, tenant, user).Scan(&rev.Added, &rev.Changed, &rev.Dated, &rev.Messages, &rev.MessagesAdded,
		&rev.Facts, &rev.Summaries)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return memory.Revisions{}, unavailable(err)
	}
	return rev, nil
}

// Load reads key's texts (Dims 0) or vectors with ids above afterID, in
// id order.
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
	if err != nil {
		return unavailable(err)
	}
	_, err = pgx.ForEachRow(rows, []any{&id, &conv, &ref, dst}, func() error {
		return add(id, conv, ref, text, vec.Slice())
	})
	return unavailable(err)
}

// LoadItems reads the user's items of ids, with their embeddings.
func (src indexSource) LoadItems(ctx context.Context, tenant, user string, ids []int64) ([]memory.Item, error) {
	items, err := collect(ctx, src.pool, func(r pgx.CollectableRow) (memory.Item, error) {
		var vec *pgvector.Vector
		it, err := scanItem(r, &vec)
		if vec != nil {
			it.Embedding = vec.Slice()
		}
		return it, err
	}, `SELECT `+itemColumns+`, embedding FROM memory_items WHERE tenant = $1 AND user_id = $2 AND id = ANY($3)`, tenant, user, ids)
	if err != nil {
		return nil, fmt.Errorf("load items: %w", err)
	}
	return items, nil
}
