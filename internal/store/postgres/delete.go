package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// DeleteConversation removes a conversation by the contract
// (storetest.Store), and the facts that only it stated
// (forgetConversationFacts), and dates the deletion (DeletedAt) once it
// holds the user's lock: exchanges received at or before it are dropped
// when they are saved. A conversation not stored (already gone, or not
// yet: its turns still queued or in flight) answers memory.ErrNotFound,
// and its deletion is dated all the same (the engine deletes twice, as it
// erases a user twice, and a turn queued before the deletion must not
// start it) and its dead letters deleted.
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
		if err := forgetConversationMentions(ctx, tx, id); err != nil {
			return err
		}
		// The messages first, counted once (deleteUncounted); summaries
		// and candidates go with the conversation (ON DELETE CASCADE).
		where := `tenant = $1 AND user_id = $2 AND conversation = $3`
		messages, err := deleteUncounted(ctx, tx, "messages", where, id.Tenant, id.User, id.Conversation)
		if err != nil {
			return err
		}
		// Its dead letters whether or not it was stored: a turn set
		// aside before its conversation was ever stored is all of it.
		if _, err := tx.Exec(ctx, `DELETE FROM dead_letters WHERE `+where, id.Tenant, id.User, id.Conversation); err != nil {
			return fmt.Errorf("delete dead_letters: %w", unavailable(err))
		}
		// Its background responses held for their answer: never stored now.
		if _, err := tx.Exec(ctx, `DELETE FROM held_responses WHERE conversation = memgate_conversation_tombstone($1, $2, $3)`,
			id.Tenant, id.User, id.Conversation); err != nil {
			return fmt.Errorf("delete held responses: %w", unavailable(err))
		}
		now := time.Now()
		if err := found(tx.Exec(ctx, `DELETE FROM conversations WHERE tenant = $1 AND user_id = $2 AND id = $3`,
			id.Tenant, id.User, id.Conversation)); errors.Is(err, memory.ErrNotFound) {
			missing = err
			if err := dateDeletion(ctx, tx, id, now, false); err != nil {
				return err
			}
			return countDeleted(ctx, tx, id.Tenant, id.User, 0, messages)
		} else if err != nil {
			return err
		}
		if err := dateDeletion(ctx, tx, id, now, true); err != nil {
			return err
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
		return countDeleted(ctx, tx, id.Tenant, id.User, items, messages)
	})
	if err == nil {
		err = missing
	}
	if err != nil {
		return fmt.Errorf("postgres: delete conversation %s: %w", id.Conversation, err)
	}
	s.index.Forget(id.Tenant, id.User) // stale already (the deletes moved the counts)
	s.vacuum.Request()
	return nil
}

// dateDeletion records, in tx, that conversation id was deleted at at,
// and whether it was stored: its tombstone holds digests of the ids, not
// the ids (migration 0027). The purge of its queued turns is owed from
// the same commit (owePurge).
func dateDeletion(ctx context.Context, tx pgx.Tx, id memory.Identity, at time.Time, stored bool) error {
	if _, err := tx.Exec(ctx, `INSERT INTO conversation_tombstones AS t (user_digest, digest, deleted_at, stored)
		VALUES (memgate_user_tombstone($1, $2), memgate_conversation_tombstone($1, $2, $3), $4, $5) ON CONFLICT (user_digest, digest)
		DO UPDATE SET deleted_at = GREATEST(t.deleted_at, EXCLUDED.deleted_at), stored = t.stored OR EXCLUDED.stored`,
		id.Tenant, id.User, id.Conversation, at, stored); err != nil {
		return fmt.Errorf("date deletion: %w", unavailable(err))
	}
	return owePurge(ctx, tx, memory.PendingPurge{Key: memory.ConversationTombstone(id), Conversation: true, At: at})
}

// ExpireTombstones deletes up to contract.UnstoredTombstonePrune
// tombstones of conversations never stored deleted before before, skipping
// those another call is deleting (no tenant waits on another's), and
// returns how many (see memory.UnstoredTombstoneLife for the before
// that keeps every deleted conversation deleted).
func (s *Store) ExpireTombstones(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM conversation_tombstones WHERE (user_digest, digest) IN
		(SELECT user_digest, digest FROM conversation_tombstones WHERE NOT stored AND deleted_at < $1
		 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, contract.UnstoredTombstonePrune)
	if err != nil {
		return 0, fmt.Errorf("postgres: expire tombstones: %w", unavailable(err))
	}
	return int(tag.RowsAffected()), nil
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
		for _, table := range []string{"fact_sources", "fact_mentions", "facts", "conversations", "dead_letters"} {
			if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE "+where, tenant, user); err != nil {
				return fmt.Errorf("delete %s: %w", table, unavailable(err))
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM conversation_tombstones WHERE user_digest = memgate_user_tombstone($1, $2)`,
			tenant, user); err != nil {
			return fmt.Errorf("delete conversation tombstones: %w", unavailable(err))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM provider_states WHERE owner = memgate_user_tombstone($1, $2)`,
			tenant, user); err != nil {
			return fmt.Errorf("delete provider states: %w", unavailable(err))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM held_responses WHERE owner = memgate_user_tombstone($1, $2)`,
			tenant, user); err != nil {
			return fmt.Errorf("delete held responses: %w", unavailable(err))
		}
		if err := countDeleted(ctx, tx, tenant, user, items, messages); err != nil {
			return err
		}
		if err := entomb(ctx, tx, tenant, user, now); err != nil {
			return err
		}
		// The purge of the user's queued turns is owed from the
		// tombstone's commit on.
		return owePurge(ctx, tx, memory.PendingPurge{Key: memory.UserTombstone(tenant, user), At: now})
	})
	if err != nil {
		return fmt.Errorf("postgres: delete user: %w", err)
	}
	s.index.Forget(tenant, user) // stale already (the deletes moved the counts)
	s.vacuum.Request()
	return nil
}

// DeletedAt returns when conversation id was last deleted, or the zero
// time when never (or not since its user's erasure).
func (s *Store) DeletedAt(ctx context.Context, id memory.Identity) (time.Time, error) {
	var at time.Time // zero when there is no row
	err := s.pool.QueryRow(ctx, `SELECT deleted_at FROM conversation_tombstones
		WHERE user_digest = memgate_user_tombstone($1, $2) AND digest = memgate_conversation_tombstone($1, $2, $3)`,
		id.Tenant, id.User, id.Conversation).Scan(&at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("postgres: deleted at: %w", unavailable(err))
	}
	return at, nil
}

// entomb records the erasure of (tenant, user) at erasedAt in the user's
// tombstone, keyed by its digest (migration 0027), and moves the user's
// revision counters there: the user's row of memory_item_revisions, keyed
// by the id, goes, and ItemRevisions reads the sum of both, so no counter
// goes back. It first fires the deferred triggers (SET CONSTRAINTS ALL
// IMMEDIATE), so the counts of the erasure's deletes are in the row it
// moves and none recreates it at the commit; it deletes the row and adds
// what the delete returns in one statement, so a count a concurrent
// commit moves is not lost. Called last in the erasure's transaction.
func entomb(ctx context.Context, tx pgx.Tx, tenant, user string, erasedAt time.Time) error {
	if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err != nil {
		return fmt.Errorf("count erasure: %w", unavailable(err))
	}
	if _, err := tx.Exec(ctx, `
		WITH gone AS (DELETE FROM memory_item_revisions WHERE tenant = $1 AND user_id = $2 RETURNING *)
		INSERT INTO user_tombstones AS t (digest, erased_at, added, changed, dated, messages_changed, messages_added,
			facts_changed, summaries_changed)
		SELECT memgate_user_tombstone($1, $2), $3, coalesce(sum(added), 0), coalesce(sum(changed), 0), coalesce(sum(dated), 0),
			coalesce(sum(messages_changed), 0), coalesce(sum(messages_added), 0),
			coalesce(sum(facts_changed), 0), coalesce(sum(summaries_changed), 0)
		FROM gone
		ON CONFLICT (digest) DO UPDATE SET erased_at = GREATEST(t.erased_at, EXCLUDED.erased_at),
			added = t.added + EXCLUDED.added, changed = t.changed + EXCLUDED.changed, dated = t.dated + EXCLUDED.dated,
			messages_changed = t.messages_changed + EXCLUDED.messages_changed,
			messages_added = t.messages_added + EXCLUDED.messages_added,
			facts_changed = t.facts_changed + EXCLUDED.facts_changed,
			summaries_changed = t.summaries_changed + EXCLUDED.summaries_changed`,
		tenant, user, erasedAt); err != nil {
		return fmt.Errorf("record erasure: %w", unavailable(err))
	}
	return nil
}
