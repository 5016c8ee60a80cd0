package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// retombstone finishes migration 0029 in Go, since SQLite has no SHA-256:
// it moves the tombstones earlier builds keyed by the ids in the clear
// (erasures, conversation_deletions) into user_tombstones and
// conversation_tombstones, keyed by their digests (contract.UserTombstone,
// ConversationTombstone), moves each erased user's revision counters into
// the user's tombstone (as entomb does), and drops the two tables, in one
// write transaction; then it truncates the WAL, whose page images held the
// ids. Once the tables are gone it only looks them up. Migrate calls it.
func (s *Store) retombstone(ctx context.Context) error {
	moved := false
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master
			WHERE type = 'table' AND name IN ('erasures', 'conversation_deletions')`).Scan(&n); err != nil || n == 0 {
			return err
		}
		moved = true
		type erasure struct {
			tenant, user string
			at           int64
		}
		var erasures []erasure
		var e erasure
		if err := eachRow(ctx, tx, `SELECT tenant, user_id, erased_at FROM erasures`, nil,
			[]any{&e.tenant, &e.user, &e.at}, func() error { erasures = append(erasures, e); return nil }); err != nil {
			return fmt.Errorf("read erasures: %w", err)
		}
		for _, e := range erasures {
			if err := entomb(ctx, tx, e.tenant, e.user, e.at); err != nil {
				return err
			}
		}
		var deletions []memory.Identity
		var id memory.Identity
		var at int64
		var ats []int64
		if err := eachRow(ctx, tx, `SELECT tenant, user_id, conversation, deleted_at FROM conversation_deletions`, nil,
			[]any{&id.Tenant, &id.User, &id.Conversation, &at}, func() error {
				deletions, ats = append(deletions, id), append(ats, at)
				return nil
			}); err != nil {
			return fmt.Errorf("read conversation deletions: %w", err)
		}
		for i, id := range deletions {
			if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_tombstones (user_digest, digest, deleted_at) VALUES (?, ?, ?)
				ON CONFLICT (user_digest, digest) DO UPDATE SET deleted_at = MAX(deleted_at, excluded.deleted_at)`,
				contract.UserTombstone(id.Tenant, id.User), contract.ConversationTombstone(id), ats[i]); err != nil {
				return fmt.Errorf("move conversation deletion: %w", err)
			}
		}
		for _, table := range []string{"erasures", "conversation_deletions"} {
			if _, err := tx.ExecContext(ctx, `DROP TABLE `+table); err != nil {
				return fmt.Errorf("drop %s: %w", table, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("digest tombstones: %w", err)
	}
	if moved {
		s.truncateWAL(ctx)
	}
	return nil
}
