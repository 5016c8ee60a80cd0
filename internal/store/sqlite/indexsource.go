package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/store/search"
)

// indexSource is what the Store's itemindex.Index reads, through the read
// pool: the rows of memory_items, and the turns around recalled messages,
// kept under the user's messages_changed (migration 0013).
type indexSource struct{ s *Store }

var _ itemindex.Source = indexSource{}

// ItemRevisions reads the user's row of memory_item_revisions (zero when
// none), moved by triggers on every write of memory_items (migrations 0005,
// 0012, 0021, 0023), messages (0013, 0014), facts and summaries (0015),
// plus the counts the user's erasures carried into the user's tombstone
// (migration 0029), so they never go back.
func (s *Store) ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error) {
	var rev memory.Revisions
	err := s.reads.QueryRowContext(ctx, `SELECT COALESCE(SUM(added), 0), COALESCE(SUM(changed), 0), COALESCE(SUM(dated), 0),
			COALESCE(SUM(messages_changed), 0), COALESCE(SUM(messages_added), 0),
			COALESCE(SUM(facts_changed), 0), COALESCE(SUM(summaries_changed), 0) FROM (
		SELECT added, changed, dated, messages_changed, messages_added, facts_changed, summaries_changed
			FROM memory_item_revisions WHERE tenant = ? AND user_id = ?
		UNION ALL
		SELECT added, changed, dated, messages_changed, messages_added, facts_changed, summaries_changed
			FROM user_tombstones WHERE digest = ?)`, tenant, user, contract.UserTombstone(tenant, user)).Scan(&rev.Added, &rev.Changed, &rev.Dated, &rev.Messages, &rev.MessagesAdded,
		&rev.Facts, &rev.Summaries)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return memory.Revisions{}, err
	}
	return rev, nil
}

// Load reads key's texts (Dims 0) or vectors of ids above afterID, by id;
// none while the user's erasure is under way.
func (src indexSource) Load(ctx context.Context, key itemindex.Key, afterID int64, add func(id int64, conv, ref string, text []byte, vec []float32) error) error {
	query, args := `SELECT id, COALESCE(conversation, ''), source, text FROM memory_items
		WHERE tenant = ? AND user_id = ? AND id > ?`+notErasing("memory_items"), []any{key.Tenant, key.User, afterID}
	if key.Dims > 0 {
		query = `SELECT id, COALESCE(conversation, ''), source, embedding FROM memory_items
		WHERE tenant = ? AND user_id = ? AND id > ? AND model = ? AND dims = ? AND embedding IS NOT NULL` + notErasing("memory_items")
		args = append(args, key.Model, key.Dims)
	}
	var (
		id        int64
		conv, ref string
		b         sql.RawBytes
		v         []float32
	)
	return eachRow(ctx, src.s.reads, query+` ORDER BY id`, args, []any{&id, &conv, &ref, &b}, func() error {
		if key.Dims > 0 {
			v, b = decodeVector(v, b), nil
		}
		return add(id, conv, ref, b, v)
	})
}

// LoadItems reads the items of ids (by id alone: the Index drops any
// that is not the user's); none while the user's erasure is under way.
func (src indexSource) LoadItems(ctx context.Context, _, _ string, ids []int64) ([]memory.Item, error) {
	return queryAll(ctx, src.s.reads, scanItem, `SELECT `+itemColumns+` FROM memory_items
		WHERE id IN (SELECT value FROM json_each(?))`+notErasing("memory_items"), jsonArray(ids))
}

// LoadSaidAt reads the user's items' times said (index of migration 0025).
func (src indexSource) LoadSaidAt(ctx context.Context, tenant, user string, ids []int64) (map[int64]time.Time, error) {
	out, id, said := make(map[int64]time.Time, len(ids)), int64(0), time.Time{}
	err := eachRow(ctx, src.s.reads, `SELECT id, COALESCE(said_at, created_at) FROM memory_items INDEXED BY memory_items_times
		WHERE tenant = ? AND user_id = ? AND id IN (SELECT value FROM json_each(?))`+notErasing("memory_items"),
		[]any{tenant, user, jsonArray(ids)}, []any{&id, (*nanoTime)(&said)}, func() error { out[id] = said; return nil })
	return out, err
}

// ReadWindows reads the live turns within radius of each of refs
// (itemindex.Source); none while the user's erasure is under way.
func (src indexSource) ReadWindows(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[itemindex.WindowKey][]memory.Message, map[itemindex.WindowKey]bool, error) {
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Conversation, r.Key}
	}
	// The superseded turns inside a window are read too (and then left
	// out), so a window whose last seq is a superseded turn counts as
	// closed.
	wr := search.NewWindowReads(radius, len(refs))
	m := memory.Message{Tenant: tenant, User: user}
	var (
		hitKey     string
		hitSeq     int64
		superseded bool
		marked     []byte
	)
	err := eachRow(ctx, src.s.reads, `SELECT r.key, h.seq, m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at,
			m.superseded_at IS NOT NULL,
			CASE WHEN instr(m.raw, '"`+memory.FailedField+`"') > 0 THEN m.raw END
		FROM (SELECT DISTINCT json_extract(value, '$[0]') AS conversation, json_extract(value, '$[1]') AS key
		      FROM json_each(?)) r
		JOIN messages h ON h.tenant = ? AND h.user_id = ? AND h.conversation = r.conversation AND h.key = r.key
		JOIN messages m ON m.tenant = h.tenant AND m.user_id = h.user_id AND m.conversation = h.conversation
			AND m.seq BETWEEN h.seq - ? AND h.seq + ?`+notErasing("h"), []any{jsonArray(pairs), tenant, user, radius, radius},
		[]any{&hitKey, &hitSeq, &m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &m.Tokens, (*nanoTime)(&m.CreatedAt), &superseded, &marked},
		func() error { wr.Add(hitKey, hitSeq, m, superseded, marked); return nil })
	return wr.Read, wr.Closed, err
}
