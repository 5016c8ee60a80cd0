package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Erasure in the embedded store, by the erasure contract (storetest.RunErasure).
//
// DeleteUser records a tombstone (a digest of tenant and user, erased_at)
// in one short write transaction, then deletes the user's rows in chunks
// of their own (erasechunks.go); every later writer checks the tombstone
// in its own write transaction, and writes are serialised on the single
// writer connection, so a check and the write it guards are atomic with
// respect to an erasure. Until the last chunk every read of the user
// answers nothing.
//
// The writer connection runs with PRAGMA secure_delete=ON, so SQLite
// overwrites deleted content (in pages and on freed pages) with zeros, and
// the full-text index runs with FTS5 secure-delete (migration 0007), so
// deleted rows' terms are removed from the index at once instead of being
// shadowed by delete markers. After an erasure a TRUNCATE checkpoint copies
// the zeroed pages into the database file and empties the WAL, which held
// the pre-erasure page images.

// ErasedAt returns when the user was last erased, or the zero time when
// never (storetest.Store).
func (s *Store) ErasedAt(ctx context.Context, tenant, user string) (time.Time, error) {
	at, err := erasedAt(ctx, s.read, tenant, user)
	if err != nil {
		return time.Time{}, fmt.Errorf("erased at: %w", err)
	}
	return at, nil
}

// refused reports whether a write about (tenant, user) guarded since (see
// memory.Fact.GuardSince; zero: not guarded) must not happen: the user was
// erased at or after since. q must be the write transaction.
func refused(ctx context.Context, q querier, tenant, user string, since time.Time) (bool, error) {
	if since.IsZero() {
		return false, nil
	}
	at, err := erasedAt(ctx, q, tenant, user)
	if err != nil {
		return false, err
	}
	return !at.IsZero() && !at.Before(since), nil
}

// checkpointAttempts bounds the TRUNCATE checkpoints tried after an erasure
// while readers still hold older snapshots.
const checkpointAttempts = 5

// truncateWAL checkpoints the whole WAL into the database file and truncates
// it to zero bytes, so page images written before an erasure leave the disk.
// A reader holding an older snapshot makes the checkpoint report busy; it is
// retried a few times, then logged: the next erasure, or SQLite's own
// checkpoints, finish the job.
func (s *Store) truncateWAL(ctx context.Context) {
	for attempt := 1; ; attempt++ {
		var busy, logFrames, done int
		err := s.write.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done)
		if err == nil && busy == 0 {
			return
		}
		if attempt >= checkpointAttempts || ctx.Err() != nil {
			s.logger.Warn("sqlite: WAL checkpoint after erasure incomplete; erased text may stay in the WAL until the next checkpoint",
				"busy", busy, "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

// guard returns memory.ErrErased when refused says the write must not happen.
func guard(ctx context.Context, q querier, tenant, user string, since time.Time) error {
	if gone, err := refused(ctx, q, tenant, user, since); gone || err != nil {
		return cmp.Or(err, memory.ErrErased)
	}
	return nil
}

// lateSQL is contract.CheckLate's query (message ?4 of conversation ?3) and itemchecks' (?4 "": the conversation, when it exists).
const lateSQL = `SELECT CASE WHEN EXISTS (SELECT 1 FROM conversations WHERE tenant = ?1 AND user_id = ?2 AND id = ?3 AND ?4 = '')
		OR EXISTS (SELECT 1 FROM messages WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND key = ?4 AND superseded_at IS NULL) THEN ?3
	ELSE COALESCE((SELECT MIN(conversation) FROM messages WHERE tenant = ?1 AND user_id = ?2 AND key = ?4 AND superseded_at IS NULL
		AND ?3 = 'default'), '') END`
