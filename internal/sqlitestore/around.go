package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

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
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Conversation, r.Key}
	}
	list, err := json.Marshal(pairs)
	if err != nil {
		return nil, fmt.Errorf("messages around: encode refs: %w", err)
	}
	rows, err := s.reads.QueryContext(ctx, `SELECT m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at,
			CASE WHEN instr(m.raw, '"`+memory.FailedField+`"') > 0 THEN m.raw END
		FROM (SELECT DISTINCT json_extract(value, '$[0]') AS conversation, json_extract(value, '$[1]') AS key
		      FROM json_each(?)) r
		JOIN messages h ON h.tenant = ? AND h.user_id = ? AND h.conversation = r.conversation AND h.key = r.key
		JOIN messages m ON m.tenant = h.tenant AND m.user_id = h.user_id AND m.conversation = h.conversation
			AND m.seq BETWEEN h.seq - ? AND h.seq + ? AND m.superseded_at IS NULL
		GROUP BY m.conversation, m.seq
		ORDER BY m.conversation, m.seq`, string(list), tenant, user, radius, radius)
	if err != nil {
		return nil, fmt.Errorf("messages around: %w", err)
	}
	defer rows.Close()
	out := []memory.Message{}
	for rows.Next() {
		m := memory.Message{Tenant: tenant, User: user}
		var (
			created int64
			marked  sql.NullString
		)
		if err := rows.Scan(&m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &m.Tokens, &created, &marked); err != nil {
			return nil, fmt.Errorf("messages around: %w", err)
		}
		if marked.Valid && (memory.Message{Raw: []byte(marked.String)}).Failed() {
			continue
		}
		m.CreatedAt = fromNanos(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages around: %w", err)
	}
	return out, nil
}
