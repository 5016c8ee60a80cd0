package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate/internal/memory"
)

// DeleteConversation removes a conversation by the contract
// (storetest.Store), and the facts that only it stated
// (forgetConversationFacts), and dates the deletion (DeletedAt) once it
// holds the user's lock: exchanges received at or before it are dropped
// when they are saved. A conversation already gone answers
// memory.ErrNotFound, and when it was deleted before, its deletion is
// dated again (the engine deletes twice, as it erases a user twice).
func (s *Store) DeleteConversation(ctx context.Context, id memory.Identity) error {
	var missing error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The user's lock, exclusively: the guarded writes of the
		// conversation's after-save hooks (which take it shared) either
		// commit before and are deleted here, or find the conversation
		// gone (deletedConversations).
		if _, err := tx.Exec(ctx, fmt.Sprintf(userLockSQL, ""), id.Tenant, id.User); err != nil {
			return fmt.Errorf("lock user: %w", unavailable(err))
		}
		// The user's recall statistics before the conversation's row, in
		// the order AddItems takes them, as the items deleted below move
		// the statistics.
		if _, err := tx.Exec(ctx, "SELECT memory_bm25_lock($1, $2)", []string{id.Tenant}, []string{id.User}); err != nil {
			return fmt.Errorf("lock statistics: %w", unavailable(err))
		}
		// The messages first, counted once (deleteUncounted); summaries
		// and candidates go with the conversation (ON DELETE CASCADE).
		where := `tenant = $1 AND user_id = $2 AND conversation = $3`
		messages, err := deleteUncounted(ctx, tx, "messages", where, id.Tenant, id.User, id.Conversation)
		if err != nil {
			return err
		}
		now := time.Now()
		if err := found(tx.Exec(ctx, `DELETE FROM conversations WHERE tenant = $1 AND user_id = $2 AND id = $3`,
			id.Tenant, id.User, id.Conversation)); errors.Is(err, memory.ErrNotFound) {
			missing = err
			if _, err := tx.Exec(ctx, `UPDATE conversation_deletions SET deleted_at = GREATEST(deleted_at, $4)
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3`, id.Tenant, id.User, id.Conversation, now); err != nil {
				return fmt.Errorf("date deletion: %w", unavailable(err))
			}
			return countDeleted(ctx, tx, id.Tenant, id.User, 0, messages)
		} else if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO conversation_deletions (tenant, user_id, conversation, deleted_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, user_id, conversation)
			DO UPDATE SET deleted_at = GREATEST(conversation_deletions.deleted_at, EXCLUDED.deleted_at)`,
			id.Tenant, id.User, id.Conversation, now); err != nil {
			return fmt.Errorf("date deletion: %w", unavailable(err))
		}
		// The items of facts another conversation stated too stay, moved
		// to it; every other item of the conversation goes.
		if err := forgetConversationFacts(ctx, tx, id); err != nil {
			return err
		}
		items, err := deleteUncounted(ctx, tx, "memory_items", where, id.Tenant, id.User, id.Conversation)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM dead_letters WHERE `+where, id.Tenant, id.User, id.Conversation); err != nil {
			return fmt.Errorf("delete dead_letters: %w", unavailable(err))
		}
		return countDeleted(ctx, tx, id.Tenant, id.User, items, messages)
	})
	if err == nil {
		err = missing
	}
	if err != nil {
		return fmt.Errorf("postgres: delete conversation %s: %w", id.Conversation, err)
	}
	s.index.Forget(id.Tenant, id.User) // stale already (the deletes moved the counts)
	s.vacuum.request()
	return nil
}

// found returns memory.ErrNotFound when the statement that answered tag
// and err changed no row; else err.
func found(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.RowsAffected() == 0 {
		return memory.ErrNotFound
	}
	return unavailable(err)
}

// DeleteUser erases a user by the erasure contract (storetest.RunErasure),
// holding the user's advisory lock exclusively, so no capture of the user
// commits halfway through, and dates the erasure once it holds it; a background VACUUM then reclaims the deleted
// rows (erasure.go says what that does and does not guarantee).
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(userLockSQL, ""), tenant, user); err != nil {
			return fmt.Errorf("lock user: %w", unavailable(err))
		}
		// Dated once the lock is held, as the embedded store dates it in
		// its write transaction: a save that held the lock committed
		// before, and one said while the erasure waited is dropped.
		now := time.Now()
		// Items and messages are counted once (deleteUncounted); the
		// rest of the conversations' rows go with them (ON DELETE CASCADE).
		where := "tenant = $1 AND user_id = $2"
		items, err := deleteUncounted(ctx, tx, "memory_items", where, tenant, user)
		if err != nil {
			return err
		}
		messages, err := deleteUncounted(ctx, tx, "messages", where, tenant, user)
		if err != nil {
			return err
		}
		for _, table := range []string{"fact_sources", "facts", "conversations", "conversation_deletions", "dead_letters"} {
			if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE "+where, tenant, user); err != nil {
				return fmt.Errorf("delete %s: %w", table, unavailable(err))
			}
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO erasures (tenant, user_id, erased_at) VALUES ($1, $2, $3)
			ON CONFLICT (tenant, user_id) DO UPDATE SET erased_at = GREATEST(erasures.erased_at, EXCLUDED.erased_at)`,
			tenant, user, now); err != nil {
			return fmt.Errorf("record erasure: %w", unavailable(err))
		}
		return countDeleted(ctx, tx, tenant, user, items, messages)
	})
	if err != nil {
		return fmt.Errorf("postgres: delete user: %w", err)
	}
	s.index.Forget(tenant, user) // stale already (the deletes moved the counts)
	s.vacuum.request()
	return nil
}

// DeletedAt returns when conversation id was last deleted, or the zero
// time when never (or not since its user's erasure).
func (s *Store) DeletedAt(ctx context.Context, id memory.Identity) (time.Time, error) {
	var at time.Time // zero when there is no row
	err := s.pool.QueryRow(ctx, `SELECT deleted_at FROM conversation_deletions WHERE tenant = $1 AND user_id = $2 AND conversation = $3`,
		id.Tenant, id.User, id.Conversation).Scan(&at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("postgres: deleted at: %w", unavailable(err))
	}
	return at, nil
}
