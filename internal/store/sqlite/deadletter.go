package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// DeadLetter sets aside an exchange the store refused for good, with the
// reason. It writes nothing for a user erased at or after d.At, or a
// conversation deleted at or after d.Received (see contract.DeadLetter), so
// an erasure or deletion is not undone through it. A zero d.At means now.
func (s *Store) DeadLetter(ctx context.Context, d memory.DeadLetter) error {
	d = contract.DeadLetter(d, time.Now())
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		if gone, err := refused(ctx, tx, d.Tenant, d.User, d.At); gone || err != nil {
			return err
		}
		deleted, err := deletedAt(ctx, tx, d.Identity)
		if err != nil || contract.DeletedSince(memory.Exchange{Received: d.Received}, deleted) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO dead_letters (tenant, user_id, conversation, exchange, reason, payload, at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, d.Tenant, d.User, d.Conversation, d.Exchange, d.Reason, d.Payload, nanos(d.At))
		return err
	})
	if err != nil {
		return fmt.Errorf("dead letter %s: %w", d.Exchange, err)
	}
	return nil
}

// DeadLetters returns the dead letters of a tenant, oldest first.
func (s *Store) DeadLetters(ctx context.Context, tenant string) ([]memory.DeadLetter, error) {
	out, err := queryAll(ctx, s.read, func(r rowScanner) (memory.DeadLetter, error) {
		d := memory.DeadLetter{Identity: memory.Identity{Tenant: tenant}}
		return d, r.Scan(&d.User, &d.Conversation, &d.Exchange, &d.Reason, &d.Payload, (*nanoTime)(&d.At))
	}, `SELECT user_id, conversation, exchange, reason, payload, at
		FROM dead_letters d WHERE tenant = ?
			AND NOT EXISTS (SELECT 1 FROM user_erasures e WHERE e.tenant = d.tenant AND e.user_id = d.user_id)
		ORDER BY id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return out, nil
}
