package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Bulk writes and the revision counters.
//
// The counters of memory_item_revisions move in deferred row triggers
// (migrations 0010, 0011, 0021), once per row, at the commit: updating one
// row n times in a transaction walks the chain of its n versions each
// time, so a transaction writing tens of thousands of a user's rows spent
// minutes on it (an erasure of 45,000 messages and their items: 2.5 min of
// the server). The writers of such bulks tell the triggers, for the
// statements that write them, that they count those rows themselves
// (migration 0024), and move each counter once, by what the statements
// wrote, at the end of their transaction, where the triggers would have:
//   - the group commit's inserts of messages (memgate.messages_counted;
//     batchWriter.countAdded);
//   - an erasure's or a conversation deletion's deletes of messages and
//     memory items (memgate.deletes_counted; deleteUncounted, countDeleted).

// deleteUncounted deletes the rows of table (messages or memory_items)
// that where selects, given args, without their row triggers' counts
// (migration 0024), and returns how many it deleted: the caller moves the
// counters by them (countDeleted) before it commits.
func deleteUncounted(ctx context.Context, tx pgx.Tx, table, where string, args ...any) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('memgate.deletes_counted', 'on', true)`)
	var n int64
	b.Queue(`DELETE FROM `+table+` WHERE `+where, args...).Exec(func(tag pgconn.CommandTag) error {
		n = tag.RowsAffected()
		return nil
	})
	b.Queue(`SELECT set_config('memgate.deletes_counted', 'off', true)`)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("delete %s: %w", table, unavailable(err))
	}
	return n, nil
}

// countDeleted moves the user's counters by the rows deleteUncounted
// deleted, as the row triggers would have at the commit: changed by the
// memory items, messages_changed by the messages. Called last in the
// transaction, it locks the user's row where the triggers would lock it.
func countDeleted(ctx context.Context, tx pgx.Tx, tenant, user string, items, messages int64) error {
	if items == 0 && messages == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO memory_item_revisions AS r (tenant, user_id, changed, messages_changed) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, user_id) DO UPDATE SET changed = r.changed + EXCLUDED.changed,
			messages_changed = r.messages_changed + EXCLUDED.messages_changed`,
		tenant, user, items, messages); err != nil {
		return fmt.Errorf("count deletes: %w", unavailable(err))
	}
	return nil
}
