package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// indexSource is what the Store's itemindex.Index reads: the rows of
// memory_items, through the read pool.
type indexSource struct{ s *Store }

var _ itemindex.Source = indexSource{}

// ItemRevisions reads the user's row of memory_item_revisions (zero when
// none), whose counters triggers move on every write of memory_items
// (migrations 0005, 0012, 0021, 0023), messages (0013, 0014), facts and
// summaries (0015).
func (s *Store) ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error) {
	var rev memory.Revisions
	err := s.reads.QueryRowContext(ctx, `SELECT added, changed, dated, messages_changed, messages_added,
			facts_changed, summaries_changed FROM memory_item_revisions
		WHERE tenant = ? AND user_id = ?`, tenant, user).Scan(&rev.Added, &rev.Changed, &rev.Dated, &rev.Messages, &rev.MessagesAdded,
		&rev.Facts, &rev.Summaries)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return memory.Revisions{}, err
	}
	return rev, nil
}

// Load reads key's texts (Dims 0) or vectors with ids above afterID, in
// id order.
func (src indexSource) Load(ctx context.Context, key itemindex.Key, afterID int64, add func(id int64, conv, ref string, text []byte, vec []float32) error) error {
	query, args := `SELECT id, COALESCE(conversation, ''), source, text FROM memory_items
		WHERE tenant = ? AND user_id = ? AND id > ?`, []any{key.Tenant, key.User, afterID}
	if key.Dims > 0 {
		query = `SELECT id, COALESCE(conversation, ''), source, embedding FROM memory_items
		WHERE tenant = ? AND user_id = ? AND id > ? AND model = ? AND dims = ? AND embedding IS NOT NULL`
		args = append(args, key.Model, key.Dims)
	}
	rows, err := src.s.reads.QueryContext(ctx, query+` ORDER BY id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var v []float32
	for rows.Next() {
		var id int64
		var conv, ref string
		var b sql.RawBytes
		if err := rows.Scan(&id, &conv, &ref, &b); err != nil {
			return err
		}
		if key.Dims > 0 {
			v, b = decodeVector(v, b), nil
		}
		if err := add(id, conv, ref, b, v); err != nil {
			return err
		}
	}
	return rows.Err()
}

// LoadItems reads the items of ids (by id alone: the Index drops any
// that is not the user's).
func (src indexSource) LoadItems(ctx context.Context, _, _ string, ids []int64) ([]memory.Item, error) {
	return src.s.loadItems(ctx, ids)
}
