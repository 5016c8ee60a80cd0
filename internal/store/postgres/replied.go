package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// Replied returns the conversations of tenant's user whose live messages
// include a reply (an assistant's message with text) whose print is reply
// (memory.Message.Print), most recently updated first, at most
// contract.RepliedHolders of them, each with its up to n live messages
// ending at its newest such reply (memory.Replied), read from one
// snapshot. The user's default conversation is one like any other: a
// full-history chat's first turn is stored there.
func (s *Store) Replied(ctx context.Context, tenant, user string, reply memory.Print, n int) ([]memory.Replied, error) {
	defer telemetry.Span(&ctx, "postgres.Replied")()
	if n <= 0 {
		return nil, nil
	}
	var out []memory.Replied
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		type holder struct {
			conv    string
			seq     int64
			updated time.Time
		}
		hs, err := collect(ctx, tx, func(row pgx.CollectableRow) (holder, error) {
			var h holder
			return h, row.Scan(&h.conv, &h.seq, &h.updated)
		}, `SELECT m.conversation, MAX(m.seq), c.updated_at FROM messages m
			JOIN conversations c ON c.tenant = m.tenant AND c.user_id = m.user_id AND c.id = m.conversation
			WHERE m.tenant = $1 AND m.user_id = $2 AND m.reply = $3 AND m.superseded_at IS NULL
			GROUP BY m.conversation, c.updated_at ORDER BY c.updated_at DESC, m.conversation LIMIT $4`,
			tenant, user, reply.Sum[:], contract.RepliedHolders)
		if err != nil {
			return err
		}
		out = make([]memory.Replied, 0, len(hs))
		for _, h := range hs {
			id := memory.Identity{Tenant: tenant, User: user, Conversation: h.conv}
			tail, err := queryMessages(ctx, tx, id, liveMessagesSQL+` AND seq <= $4 ORDER BY seq DESC LIMIT $5`, h.seq, n)
			if err != nil {
				return err
			}
			slices.Reverse(tail)
			out = append(out, memory.Replied{Conversation: h.conv, UpdatedAt: h.updated, Tail: tail})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: look a reply up: %w", unavailable(err))
	}
	return out, nil
}
