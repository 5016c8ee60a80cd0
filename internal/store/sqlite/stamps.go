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
