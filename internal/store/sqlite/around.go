package sqlite

import (
	"context"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/search"
)

// ReadWindows reads the live turns within radius of each of refs
// (itemindex.Source), kept under the user's messages_changed
// (migration 0013).
func (src indexSource) ReadWindows(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[itemindex.WindowKey][]memory.Message, map[itemindex.WindowKey]bool, error) {
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Conversation, r.Key}
	}
	// The superseded turns inside a window are read too (and then left
	// out), so a window whose last seq is a superseded turn counts as
	// closed.
	rows, err := src.s.reads.QueryContext(ctx, `SELECT r.key, h.seq, m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at,
			m.superseded_at IS NOT NULL,
			CASE WHEN instr(m.raw, '"`+memory.FailedField+`"') > 0 THEN m.raw END
		FROM (SELECT DISTINCT json_extract(value, '$[0]') AS conversation, json_extract(value, '$[1]') AS key
		      FROM json_each(?)) r
		JOIN messages h ON h.tenant = ? AND h.user_id = ? AND h.conversation = r.conversation AND h.key = r.key
		JOIN messages m ON m.tenant = h.tenant AND m.user_id = h.user_id AND m.conversation = h.conversation
			AND m.seq BETWEEN h.seq - ? AND h.seq + ?`, jsonArray(pairs), tenant, user, radius, radius)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	wr := search.NewWindowReads(radius, len(refs))
	for rows.Next() {
		m := memory.Message{Tenant: tenant, User: user}
		var (
			hitKey     string
			hitSeq     int64
			superseded bool
			marked     []byte
		)
		if err := rows.Scan(&hitKey, &hitSeq, &m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &m.Tokens,
			(*nanoTime)(&m.CreatedAt), &superseded, &marked); err != nil {
			return nil, nil, err
		}
		wr.Add(hitKey, hitSeq, m, superseded, marked)
	}
	return wr.Read, wr.Closed, rows.Err()
}
