package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// DeleteConversation removes a conversation by the contract
// (storetest.Store), exchange records and FTS rows included, and the facts
// that only it stated (forgetConversationFacts), and dates the deletion
// (DeletedAt): exchanges received at or before it are dropped when they
// are saved. A conversation not stored (already gone, or not yet: its
// turns still queued or in flight) answers memory.ErrNotFound, and its
// deletion is dated all the same (the engine deletes twice, as it erases
// a user twice, and a turn queued before the deletion must not start it)
// and its dead letters deleted.
func (s *Store) DeleteConversation(ctx context.Context, id memory.Identity) error {
	var missing error
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		// Its messages' mentions first: the messages go with the
		// conversation's row (ON DELETE CASCADE).
		if err := forgetConversationMentions(ctx, tx, id); err != nil {
			return err
		}
		// Its dead letters whether or not it was stored: a turn set
		// aside before its conversation was ever stored is all of it.
		if _, err := tx.ExecContext(ctx, `DELETE FROM dead_letters WHERE tenant = ? AND user_id = ? AND conversation = ?`,
			id.Tenant, id.User, id.Conversation); err != nil {
			return fmt.Errorf("delete dead_letters: %w", err)
		}
		// Its background responses held for their answer: never stored now.
		if _, err := tx.ExecContext(ctx, `DELETE FROM held_responses WHERE conversation = ?`,
			contract.ConversationTombstone(id)); err != nil {
			return fmt.Errorf("delete held responses: %w", err)
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE tenant = ? AND user_id = ? AND id = ?`,
			id.Tenant, id.User, id.Conversation)
		if err := found(r, err, "conversation "+id.Conversation); errors.Is(err, memory.ErrNotFound) {
			missing = err
			return dateDeletion(ctx, tx, id, false)
		} else if err != nil {
			return err
		}
		// The items of facts another conversation stated too stay, moved
		// to it; every other item of the conversation goes.
		if err := forgetConversationFacts(ctx, tx, id); err != nil {
			return err
		}
		for _, table := range []string{"summaries", "messages", "exchanges", "conversation_candidates", "memory_items"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE tenant = ? AND user_id = ? AND conversation = ?`,
				id.Tenant, id.User, id.Conversation); err != nil {
				return fmt.Errorf("delete %s: %w", table, err)
			}
		}
		// Dated last, in the writer's transaction: a save either committed
		// before (and is deleted here) or reads the date.
		return dateDeletion(ctx, tx, id, true)
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

// dateDeletion records, in tx, that conversation id is deleted now, and
// whether it was stored: its tombstone holds digests of the ids, not the
// ids (contract.ConversationTombstone). The purge of its queued turns is
// owed from the same commit (owePurge).
func dateDeletion(ctx context.Context, tx *sql.Tx, id memory.Identity, stored bool) error {
	now := time.Now()
	digest := contract.ConversationTombstone(id)
	if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_tombstones (user_digest, digest, deleted_at, stored)
		VALUES (?, ?, ?, ?) ON CONFLICT (user_digest, digest) DO UPDATE SET deleted_at = MAX(deleted_at, excluded.deleted_at),
			stored = MAX(stored, excluded.stored)`,
		contract.UserTombstone(id.Tenant, id.User), digest, nanos(now), stored); err != nil {
		return fmt.Errorf("date deletion: %w", err)
	}
	return owePurge(ctx, tx, memory.PendingPurge{Key: digest, Conversation: true, At: now})
}

// ExpireTombstones deletes up to contract.UnstoredTombstonePrune
// tombstones of conversations never stored deleted before before, and
// returns how many (see memory.UnstoredTombstoneLife for the before
// that keeps every deleted conversation deleted).
func (s *Store) ExpireTombstones(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM conversation_tombstones WHERE (user_digest, digest) IN
			(SELECT user_digest, digest FROM conversation_tombstones WHERE stored = 0 AND deleted_at < ? LIMIT ?)`,
			nanos(before), contract.UnstoredTombstonePrune)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire tombstones: %w", err)
	}
	return int(n), nil
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

// entomb records the erasure of (tenant, user) at erasedAt (Unix
// nanoseconds) in the user's tombstone, keyed by its digest
// (contract.UserTombstone), and moves the user's revision counters there:
// the user's row of memory_item_revisions, keyed by the id, goes, and
// ItemRevisions reads the sum of both, so no counter goes back. Called
// last in the erasure's transaction, after the deletes moved the counters.
func entomb(ctx context.Context, tx *sql.Tx, tenant, user string, erasedAt int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO user_tombstones (digest, erased_at, added, changed, dated,
			messages_changed, messages_added, facts_changed, summaries_changed)
		SELECT ?1, ?2, COALESCE(SUM(added), 0), COALESCE(SUM(changed), 0), COALESCE(SUM(dated), 0),
			COALESCE(SUM(messages_changed), 0), COALESCE(SUM(messages_added), 0),
			COALESCE(SUM(facts_changed), 0), COALESCE(SUM(summaries_changed), 0)
		FROM memory_item_revisions WHERE tenant = ?3 AND user_id = ?4
		ON CONFLICT (digest) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at),
			added = added + excluded.added, changed = changed + excluded.changed, dated = dated + excluded.dated,
			messages_changed = messages_changed + excluded.messages_changed, messages_added = messages_added + excluded.messages_added,
			facts_changed = facts_changed + excluded.facts_changed, summaries_changed = summaries_changed + excluded.summaries_changed`,
		contract.UserTombstone(tenant, user), erasedAt, tenant, user); err != nil {
		return fmt.Errorf("record erasure: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_item_revisions WHERE tenant = ? AND user_id = ?`, tenant, user); err != nil {
		return fmt.Errorf("move revisions: %w", err)
	}
	return nil
}
