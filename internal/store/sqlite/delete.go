package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// DeleteConversation removes a conversation by the contract
// (storetest.Store), exchange records and FTS rows included, and the facts
// that only it stated (forgetConversationFacts), and dates the deletion
// (DeletedAt): exchanges received at or before it are dropped when they
// are saved. A conversation already gone answers memory.ErrNotFound, and
// when it was deleted before, its deletion is dated again (the engine
// deletes twice, as it erases a user twice).
func (s *Store) DeleteConversation(ctx context.Context, id memory.Identity) error {
	var missing error
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE tenant = ? AND user_id = ? AND id = ?`,
			id.Tenant, id.User, id.Conversation)
		if err := found(r, err, "conversation "+id.Conversation); errors.Is(err, memory.ErrNotFound) {
			missing = err
			if _, err := tx.ExecContext(ctx, `UPDATE conversation_deletions SET deleted_at = MAX(deleted_at, ?)
				WHERE tenant = ? AND user_id = ? AND conversation = ?`, nanos(time.Now()), id.Tenant, id.User, id.Conversation); err != nil {
				return fmt.Errorf("date deletion: %w", err)
			}
			return nil
		} else if err != nil {
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
		// Dated last, in the writer's transaction: a save either committed
		// before (and is deleted here) or reads the date.
		if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_deletions (tenant, user_id, conversation, deleted_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (tenant, user_id, conversation) DO UPDATE SET deleted_at = MAX(deleted_at, excluded.deleted_at)`,
			id.Tenant, id.User, id.Conversation, nanos(time.Now())); err != nil {
			return fmt.Errorf("date deletion: %w", err)
		}
		return nil
	})
	if err == nil {
		err = missing
	}
	if err != nil {
		return fmt.Errorf("delete conversation: %w", err)
	}
	s.index.Forget(id.Tenant, id.User) // stale already (the deletes moved the counts)
	s.truncateWAL(ctx)
	return nil
}

// DeletedAt returns when conversation id was last deleted, or the zero
// time when never (or not since its user's erasure).
func (s *Store) DeletedAt(ctx context.Context, id memory.Identity) (time.Time, error) {
	at, err := deletedAt(ctx, s.read, id)
	if err != nil {
		return time.Time{}, fmt.Errorf("deleted at: %w", err)
	}
	return at, nil
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
		for _, table := range []string{"memory_items", "fact_sources", "facts", "summaries", "messages", "exchanges", "conversation_candidates", "conversations", "conversation_deletions", "dead_letters"} {
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
