package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// appendsOnly reports whether ex can be stored by saveTurn: it resends no
// history (nothing to align) and has no candidate conversation (see
// Adopt), so it only appends its turn and reply.
func appendsOnly(ex memory.Exchange) bool {
	return len(ex.Prior) == 0 && ex.Candidate == ""
}

// Results of memgate_save_turn other than a first seq.
const (
	turnErased    = -1
	turnDuplicate = -2
)

// saveTurn stores an exchange for which appendsOnly holds in one round
// trip (migration 0012's memgate_save_turn, a statement that commits on
// its own), with SaveExchange's results.
func (s *Store) saveTurn(ctx context.Context, ex memory.Exchange, at time.Time) (memory.SaveResult, error) {
	msgs := make([]memory.Message, 0, len(ex.Turn)+1)
	msgs = append(append(msgs, ex.Turn...), ex.Reply)
	n := len(msgs)
	keys, roles, contents := make([]string, n), make([]string, n), make([]string, n)
	raws, tokens, created := make([]*string, n), make([]int32, n), make([]time.Time, n)
	for i, m := range msgs {
		keys[i], roles[i], contents[i], tokens[i] = memory.Key(ex.ID, i), m.Role, m.Content, int32(m.Tokens)
		if len(m.Raw) > 0 {
			raw := string(m.Raw)
			raws[i] = &raw
		}
		created[i] = m.CreatedAt
		if created[i].IsZero() {
			created[i] = at
		}
	}
	var first int64
	err := s.pool.QueryRow(ctx, `SELECT memgate_save_turn($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		ex.Tenant, ex.User, ex.Conversation, at, keys, roles, contents, raws, tokens, created).Scan(&first)
	switch {
	case isUniqueViolation(err, messageKeyConstraint):
		// A concurrent save of the same exchange won.
		return memory.SaveResult{Duplicate: true}, nil
	case err != nil:
		return memory.SaveResult{}, fmt.Errorf("postgres: save exchange %s: %w", ex.ID, permanent(unavailable(err)))
	case first == turnErased:
		return memory.SaveResult{Dropped: true}, nil
	case first == turnDuplicate:
		return memory.SaveResult{Duplicate: true}, nil
	}
	res := memory.SaveResult{Inserted: n, Stored: make([]memory.Message, n)}
	for i, m := range msgs {
		res.Stored[i] = asStored(memory.Message{Tenant: ex.Tenant, User: ex.User, Conversation: ex.Conversation,
			Seq: first + int64(i), Key: keys[i], Role: m.Role, Content: m.Content, Raw: m.Raw,
			Tokens: m.Tokens, CreatedAt: created[i]})
	}
	return res, nil
}
