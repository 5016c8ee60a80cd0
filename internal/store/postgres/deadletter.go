package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// DeadLetter sets aside an exchange the store refused for good, with the
// reason. It writes nothing for a user erased at or after d.At, or a
// conversation deleted at or after d.Received (see contract.DeadLetter;
// under the same user lock as SaveExchange, which DeleteUser and
// DeleteConversation take exclusively), so an erasure or deletion is not
// undone through it.
// The reason is sanitized by the caller; the payload is kept as bytes.
func (s *Store) DeadLetter(ctx context.Context, d memory.DeadLetter) error {
	d = contract.DeadLetter(d, time.Now())
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(userLockSQL, "_shared"), d.Tenant, d.User); err != nil {
			return unavailable(err)
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO dead_letters (tenant, user_id, conversation, exchange, reason, payload, at)
			SELECT $1, $2, $3, $4, $5, $6, $7
			WHERE NOT EXISTS (SELECT 1 FROM user_tombstones WHERE digest = memgate_user_tombstone($1, $2) AND erased_at >= $7)
			AND NOT EXISTS (SELECT 1 FROM conversation_tombstones
				WHERE user_digest = memgate_user_tombstone($1, $2) AND digest = memgate_conversation_tombstone($1, $2, $3)
					AND deleted_at >= $8)`,
			d.Tenant, d.User, d.Conversation, d.Exchange, d.Reason, d.Payload, d.At, d.Received)
		return unavailable(err)
	})
	if err != nil {
		return fmt.Errorf("postgres: dead letter %s: %w", d.Exchange, err)
	}
	return nil
}

// DeadLetters returns the dead letters of a tenant, oldest first.
func (s *Store) DeadLetters(ctx context.Context, tenant string) ([]memory.DeadLetter, error) {
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (memory.DeadLetter, error) {
		d := memory.DeadLetter{Identity: memory.Identity{Tenant: tenant}}
		return d, row.Scan(&d.User, &d.Conversation, &d.Exchange, &d.Reason, &d.Payload, &d.At)
	}, `SELECT user_id, conversation, exchange, reason, payload, at
		FROM dead_letters WHERE tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("postgres: dead letters: %w", err)
	}
	return out, nil
}
