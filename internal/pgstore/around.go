package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
)

// MessagesAround returns the live messages within radius turns of each
// message refs names (the message itself included, when live), of the
// user's conversations, each message once, ordered by conversation and
// Seq. Raw is left empty. A reply the upstream broke off
// (memory.Message.Failed) is left out: it is never recalled, not even as a
// neighbour. Unknown refs, and refs of other users or tenants, add nothing;
// radius < 0 finds nothing.
func (s *Store) MessagesAround(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) ([]memory.Message, error) {
	if len(refs) == 0 || radius < 0 {
		return []memory.Message{}, nil
	}
	convs, keys := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		convs[i], keys[i] = r.Conversation, r.Key
	}
	// Each ref is looked up, and its neighbours read, by index (LATERAL,
	// fenced with OFFSET 0 so the planner cannot flatten it into joins):
	// as plain joins, a planner misled by stale statistics (a table filled
	// since its last ANALYZE) joined every message of the user with every
	// other, hundreds of milliseconds for a few hundred turns.
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at, m.marked
		FROM unnest($3::text[], $4::text[]) AS r(conversation, key)
		CROSS JOIN LATERAL (
			SELECT h.seq FROM messages h
			WHERE h.tenant = $1 AND h.user_id = $2 AND h.conversation = r.conversation AND h.key = r.key OFFSET 0) h
		CROSS JOIN LATERAL (
			SELECT m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at,
				CASE WHEN strpos(m.raw::text, '"`+memory.FailedField+`"') > 0 THEN m.raw::text END AS marked
			FROM messages m
			WHERE m.tenant = $1 AND m.user_id = $2 AND m.conversation = r.conversation
				AND m.seq BETWEEN h.seq - $5 AND h.seq + $5 AND m.superseded_at IS NULL OFFSET 0) m
		ORDER BY m.conversation, m.seq`, tenant, user, convs, keys, radius)
	if err != nil {
		return nil, fmt.Errorf("pgstore: messages around: %w", unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Message, error) {
		m := memory.Message{Tenant: tenant, User: user}
		var marked *string
		err := r.Scan(&m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &m.Tokens, &m.CreatedAt, &marked)
		m.CreatedAt = m.CreatedAt.UTC()
		if marked != nil && (memory.Message{Raw: []byte(*marked)}).Failed() {
			m.Role = "" // a failed reply: left out below
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: messages around: %w", unavailable(err))
	}
	out = slices.DeleteFunc(out, func(m memory.Message) bool { return m.Role == "" })
	if out == nil {
		out = []memory.Message{}
	}
	return out, nil
}
