package postgres

import (
	"context"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/search"
)

// ReadWindows reads the turns within radius of each of refs
// (itemindex.Source), kept under the user's messages_changed
// (migration 0011). Superseded turns are read too, and then left
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
