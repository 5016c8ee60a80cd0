package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// StampAt returns the live message of conversation id with the greatest
// position at or below pos among those stored with a Stamp (by a
// full-history client's exchange), with its Stamp; memory.ErrNotFound when
// there is none. One read of the messages_live_pos index.
func (s *Store) StampAt(ctx context.Context, id memory.Identity, pos int) (memory.Stamped, error) {
	defer telemetry.Span(&ctx, "sqlite.StampAt")()
	row := s.reads.QueryRowContext(ctx, `SELECT `+contract.MessageColumns+`, pos, digest FROM messages
		WHERE tenant = ? AND user_id = ? AND conversation = ? AND superseded_at IS NULL AND digest IS NOT NULL AND pos <= ?`+
		notErasing("messages")+`
		ORDER BY pos DESC LIMIT 1`, id.Tenant, id.User, id.Conversation, pos)
	st, err := contract.ScanStamped(row, times{}, id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return memory.Stamped{}, memory.ErrNotFound
	case err != nil:
		return memory.Stamped{}, fmt.Errorf("read message stamp: %w", err)
	}
	return st, nil
}

// StampAmends returns the Amends the messages of conversation id carry,
// live or not, by position: one read of the messages_amends index (none
// for a chat whose client never edited what its requests leave out).
func (s *Store) StampAmends(ctx context.Context, id memory.Identity) ([]memory.Amend, error) {
	defer telemetry.Span(&ctx, "sqlite.StampAmends")()
	rows, err := s.reads.QueryContext(ctx, `SELECT seq, pos, amend FROM messages
		WHERE tenant = ? AND user_id = ? AND conversation = ? AND amend IS NOT NULL AND pos IS NOT NULL`+
		notErasing("messages")+`
		ORDER BY pos, seq`, id.Tenant, id.User, id.Conversation)
	if err != nil {
		return nil, fmt.Errorf("read stamp amends: %w", err)
	}
	defer rows.Close()
	var out []memory.Amend
	for rows.Next() {
		var (
			a     memory.Amend
			amend []byte
		)
		if err := rows.Scan(&a.Seq, &a.Pos, &amend); err != nil {
			return nil, fmt.Errorf("read stamp amends: %w", err)
		}
		a.Delta = contract.AmendOf(amend)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stamp amends: %w", err)
	}
	return out, nil
}
