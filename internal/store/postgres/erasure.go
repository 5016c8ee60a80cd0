package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
)

// Erasure on PostgreSQL, by the erasure contract (storetest.RunErasure).
//
// DeleteUser takes the user's advisory lock exclusively, deletes every row
// of the user and records a tombstone (erased_at), keyed by a digest of the
// tenant and user ids, not the ids (migration 0027's
// memgate_user_tombstone, contract.UserTombstone). Every writer
// takes the same lock shared and checks the tombstone in its own
// transaction, so a write either commits before the erasure (and is deleted
// by it) or sees the tombstone.
//
// On disk: PostgreSQL has no secure delete. After an erasure the store runs
// VACUUM (INDEX_CLEANUP ON) on the tables that held the user's rows, in the
// background and coalesced (one run covers every erasure before it starts):
// the dead row versions and their index entries (full-text included) are
// removed and their space is marked free, so nothing of the user can be read
// back by any query, scan, dump or logical replica. VACUUM does not
// overwrite the freed bytes: they stay in the table, TOAST and index files
// until PostgreSQL reuses the space, and in WAL segments, physical replicas
// and base backups until those are recycled. Removing the bytes from the
// data files needs a rewrite (VACUUM FULL, which locks the table
// exclusively, or pg_repack) and WAL/backup retention the operator controls.

// erasedTables are the tables vacuumed after an erasure: those of the
// user's rows, and those whose rows are keyed by the user's id (the BM25
// statistics, the revision counters, the held background exchanges).
var erasedTables = []string{"messages", "summaries", "facts", "fact_sources", "fact_mentions", "memory_items", "conversations",
	"memory_item_stats", "memory_term_df", "memory_item_terms", "memory_item_revisions", "held_responses"}

// ErasedAt returns when the user was last erased, or the zero time when
// never (storetest.Store).
func (s *Store) ErasedAt(ctx context.Context, tenant, user string) (time.Time, error) {
	var at time.Time // zero when there is no row
	err := s.pool.QueryRow(ctx, `SELECT erased_at FROM user_tombstones WHERE digest = memgate_user_tombstone($1, $2)`,
		tenant, user).Scan(&at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("postgres: erased at: %w", unavailable(err))
	}
	return at, nil
}

// guard applies the erasure guard since of a write about (tenant, user)
// (see memory.Fact.GuardSince) inside its transaction: it takes the user's
// advisory lock shared — so an erasure cannot commit between the check and
// the write — and returns memory.ErrErased when the user was erased at or
// after since. A zero since (no guard) does nothing. Call it before the
// transaction takes any other lock.
func guard(ctx context.Context, tx pgx.Tx, tenant, user string, since time.Time) error {
	if since.IsZero() {
		return nil
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(userLockSQL, "_shared"), tenant, user); err != nil {
		return fmt.Errorf("lock user: %w", unavailable(err))
	}
	var erased bool
	if err := tx.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM user_tombstones WHERE digest = memgate_user_tombstone($1, $2) AND erased_at >= $3)`,
		tenant, user, since).Scan(&erased); err != nil {
		return fmt.Errorf("check erasure: %w", unavailable(err))
	}
	if erased {
		return memory.ErrErased
	}
	return nil
}

// vacuumTimeout bounds one post-erasure VACUUM.
const vacuumTimeout = 30 * time.Minute

// vacuumInterval is the least time between the starts of two
// post-erasure VACUUM runs of one store.
const vacuumInterval = time.Minute

// newVacuumer returns the loop that runs the post-erasure VACUUM in the
// background, one at a time: requests that arrive while one runs are
// served by a single next run, and runs start at least vacuumInterval
// apart, so erasures in a loop (a tenant's admin deleting ids one by one)
// keep PostgreSQL vacuuming at most one run an interval instead of back to
// back. The erased rows are already unreadable by any query when the
// erasure commits; the wait only delays when their space is reclaimed and
// their index entries go.
func newVacuumer(pool *pgxpool.Pool, logger *slog.Logger) *pace.Loop {
	return pace.New(vacuumInterval, func(ctx context.Context) {
		start := time.Now()
		vctx, cancel := context.WithTimeout(ctx, vacuumTimeout)
		defer cancel()
		// INDEX_CLEANUP ON: without it VACUUM may skip the indexes when few
		// rows died, leaving the erased rows' index entries in place.
		if _, err := pool.Exec(vctx, "VACUUM (INDEX_CLEANUP ON) "+strings.Join(erasedTables, ", ")); err != nil {
			if ctx.Err() == nil {
				logger.Warn("postgres: VACUUM after erasure failed; autovacuum will reclaim the rows later", "err", err)
			}
			return
		}
		logger.Info("postgres: vacuumed after erasure", "tables", len(erasedTables), "took", time.Since(start))
	}, nil)
}

// lateSQL is contract.CheckLate's query (of message $4 of conversation $3).
const lateSQL = `SELECT CASE WHEN EXISTS (SELECT 1 FROM messages
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND key = $4 AND superseded_at IS NULL) THEN $3::text
	ELSE coalesce((SELECT min(conversation) FROM messages WHERE tenant = $1 AND user_id = $2 AND key = $4 AND superseded_at IS NULL
		AND $3 = 'default'), '') END`

// deletedConversations returns those of ids, the conversations of guarded
// writes, that were deleted: such a write is refused
// (contract.GuardedConversations, which leaves out the default
// conversation). Call it after guard, whose shared user lock
// DeleteConversation takes exclusively, so no deletion commits between the
// check and the write.
func deletedConversations(ctx context.Context, tx pgx.Tx, ids []memory.Identity) (map[memory.Identity]bool, error) {
	var tenants, users, convs []string
	for _, id := range ids {
		tenants, users, convs = append(tenants, id.Tenant), append(users, id.User), append(convs, id.Conversation)
	}
	if len(convs) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT DISTINCT u.tenant, u.user_id, u.conversation
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(tenant, user_id, conversation)
		WHERE NOT EXISTS (SELECT 1 FROM conversations c
			WHERE c.tenant = u.tenant AND c.user_id = u.user_id AND c.id = u.conversation)`, tenants, users, convs)
	deleted := map[memory.Identity]bool{}
	var id memory.Identity
	return deleted, eachRow(rows, err, "check conversations", []any{&id.Tenant, &id.User, &id.Conversation},
		func() { deleted[id] = true })
}
