package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// DeleteConversation removes a conversation by the contract
// (storetest.Store), exchange records and FTS rows included, and the facts
// that only it stated (forgetConversationFacts).
func (s *Store) DeleteConversation(ctx context.Context, id memory.Identity) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE tenant = ? AND user_id = ? AND id = ?`,
			id.Tenant, id.User, id.Conversation)
		if err := found(r, err, "conversation "+id.Conversation); err != nil {
			return err
		}
		// The items of facts another conversation stated too stay, moved
		// to it; every other item of the conversation goes.
		if err := forgetConversationFacts(ctx, tx, id); err != nil {
			return err
		}
		for _, table := range []string{"summaries", "messages", "exchanges", "conversation_candidates", "dead_letters", "memory_items"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE tenant = ? AND user_id = ? AND conversation = ?`,
				id.Tenant, id.User, id.Conversation); err != nil {
				return fmt.Errorf("delete %s: %w", table, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete conversation: %w", err)
	}
	s.index.Forget(id.Tenant, id.User) // stale already (the deletes moved the counts)
	s.truncateWAL(ctx)
	return nil
}

// found returns memory.ErrNotFound, naming what, when the statement that
// answered r and err changed no row; else err.
func found(r sql.Result, err error, what string) error {
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n > 0 {
		return err
	}
	return fmt.Errorf("%s: %w", what, memory.ErrNotFound)
}

// DeleteUser erases a user by the erasure contract (storetest.RunErasure),
// exchange records and FTS rows included; the deleted text is overwritten
// on disk (secure_delete) and the WAL is checkpointed and truncated before
// it returns (erasure.go).
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"memory_items", "fact_sources", "facts", "summaries", "messages", "exchanges", "conversation_candidates", "conversations", "dead_letters"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE tenant = ? AND user_id = ?`, tenant, user); err != nil {
				return fmt.Errorf("delete %s: %w", table, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO erasures (tenant, user_id, erased_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, user_id) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at)`,
			tenant, user, nanos(time.Now())); err != nil {
			return fmt.Errorf("record erasure: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	s.index.Forget(tenant, user) // stale already (the deletes moved the counts)
	s.truncateWAL(ctx)
	s.logger.Info("erased user", "tenant", tenant)
	return nil
}
