package sqlite

import (
	"context"
	"fmt"

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
// full-history chat's first turn is stored there. A user being erased has none.
func (s *Store) Replied(ctx context.Context, tenant, user string, reply memory.Print, n int) ([]memory.Replied, error) {
	defer telemetry.Span(&ctx, "sqlite.Replied")()
	if n <= 0 {
		return nil, nil
	}
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("look a reply up: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to undo
	type holder struct {
		r   memory.Replied
		seq int64
	}
	hs, err := queryAll(ctx, tx, func(r rowScanner) (holder, error) {
		var h holder
		return h, r.Scan(&h.r.Conversation, &h.seq, (*nanoTime)(&h.r.UpdatedAt))
	}, `SELECT m.conversation, MAX(m.seq), c.updated_at FROM messages m
		JOIN conversations c ON c.tenant = m.tenant AND c.user_id = m.user_id AND c.id = m.conversation
		WHERE m.tenant = ? AND m.user_id = ? AND m.reply = ? AND m.superseded_at IS NULL`+notErasing("m")+`
		GROUP BY m.conversation ORDER BY c.updated_at DESC, m.conversation LIMIT ?`,
		tenant, user, reply.Sum[:], contract.RepliedHolders)
	if err != nil {
		return nil, fmt.Errorf("look a reply up: %w", err)
	}
	out := make([]memory.Replied, 0, len(hs))
	for _, h := range hs {
		id := memory.Identity{Tenant: tenant, User: user, Conversation: h.r.Conversation}
		if h.r.Tail, err = liveTail(ctx, tx, id, n, ` AND seq <= `+fmt.Sprint(h.seq)); err != nil {
			return nil, fmt.Errorf("look a reply up: %w", err)
		}
		out = append(out, h.r)
	}
	return out, nil
}
