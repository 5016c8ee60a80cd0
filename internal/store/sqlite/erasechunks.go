package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/store/contract"
)

// An erasure in chunks. Deleting a user's rows costs more than their
// bytes: FTS5 secure-delete removes each item's terms from the index at
// once (about 4 ms a message of distinct words), and every write of every
// tenant waits on the single writer meanwhile. So DeleteUser writes the
// tombstone first, with a row of user_erasures (migration 0033), in one
// short write transaction: from its commit on, late writes are refused
// (the tombstone) and every read of the user answers nothing (erasing).
// Then it deletes the user's rows in chunks, each its own write
// transaction of at most eraseBudget (one batch past it at most), so the
// captures of other tenants commit between two chunks; the last chunk,
// finding nothing left, moves the user's revision counters into the
// tombstone again and deletes the user_erasures row. A process that stops
// mid-way leaves the row: the store that opens next finishes the erasure
// (resumeErasures), and the user stays invisible until then.

// eraseSteps are the tables of a user's rows in the order an erasure
// deletes them, each with the columns that, after tenant and user_id,
// name a row, and how many rows one statement deletes: the full-text
// index's items first, one at a time (removing an item's terms costs up
// to ~10 ms for 40 distinct words on a loaded 2-core machine), the
// conversations last (their children gone, the cascade has nothing left).
var eraseSteps = []struct {
	table, key string
	batch      int
}{
	{"memory_items", "id", 1},
	{"facts", "id", 8}, // with their sources and mentions (triggers)
	{"fact_sources", "conversation, fact_id", eraseBatch},
	{"fact_mentions", "message, rule, fact_id", eraseBatch},
	{"summaries", "id", 8},
	{"messages", "id", eraseBatch}, // with their index backlog (cascade)
	{"exchanges", "conversation, id", eraseBatch},
	{"conversation_candidates", "candidate, first_key", eraseBatch},
	{"dead_letters", "id", 8},
	{"conversations", "id", eraseBatch},
}

// eraseBatch is how many rows one statement of a chunk deletes at most,
// and eraseBudget how long a chunk goes on deleting before it commits and
// yields the writer (it runs over by one statement at most).
const (
	eraseBatch  = 32
	eraseBudget = 20 * time.Millisecond
)

// chunkHook, when set (tests only), is called after each committed chunk of
// an erasure, with its number from 1; an error stops the erasure there, as
// a process stopping would.
type chunkHook func(chunk int) error

// DeleteUser erases a user by the erasure contract (storetest.RunErasure),
// exchange records and FTS rows included: it writes the tombstone, after
// which the user reads as empty and late writes are refused, then deletes
// the rows in chunks (eraseChunk) and returns once all are gone. The
// deleted text is overwritten on disk (secure_delete) and the WAL is
// checkpointed and truncated before it returns (erasure.go). An error
// after the tombstone committed says the rows were not all deleted yet:
// the user stays erased and invisible, and the rest is deleted in the
// background (resumeErasures), or when a store opens the database next.
func (s *Store) DeleteUser(ctx context.Context, tenant, user string) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		now := nanos(time.Now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_erasures (tenant, user_id, erased_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, user_id) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at)`, tenant, user, now); err != nil {
			return fmt.Errorf("record erasure under way: %w", err)
		}
		if err := entomb(ctx, tx, tenant, user, now); err != nil {
			return err
		}
		// The purge of the user's queued turns is owed from the
		// tombstone's commit on.
		if err := owePurge(ctx, tx, memory.PendingPurge{Key: contract.UserTombstone(tenant, user), At: fromNanos(now)}); err != nil {
			return err
		}
		// Every reader holding the user's memory reads it again, and finds
		// nothing (erasing): the counters move before a row is deleted.
		if _, err := tx.ExecContext(ctx, `UPDATE user_tombstones SET changed = changed + 1,
			messages_changed = messages_changed + 1, facts_changed = facts_changed + 1,
			summaries_changed = summaries_changed + 1 WHERE digest = ?`, contract.UserTombstone(tenant, user)); err != nil {
			return fmt.Errorf("move revisions: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	s.index.Forget(tenant, user)
	if err := s.finishErasure(ctx, tenant, user, false); err != nil {
		s.resume() // the background finishes it
		return fmt.Errorf("delete user: erased, but not every row deleted yet: %w", err)
	}
	s.logger.Info("erased user", "tenant", tenant)
	return nil
}

// finishErasure deletes the rows of (tenant, user), whose erasure is under
// way, chunk after chunk until none is left, then truncates the WAL.
func (s *Store) finishErasure(ctx context.Context, tenant, user string, background bool) error {
	for chunk := 1; ; chunk++ {
		done, err := s.eraseChunk(ctx, tenant, user, background)
		if err != nil {
			return err
		}
		if s.afterChunk != nil {
			if err := s.afterChunk(chunk); err != nil {
				return err
			}
		}
		if done {
			break
		}
	}
	s.index.Forget(tenant, user) // stale already (the deletes moved the counts)
	s.truncateWAL(ctx)
	return nil
}

// eraseChunk deletes, in one write transaction, the user's rows in
// eraseSteps' order, then the conversations' tombstones the user's
// covers, a batch at a time, until eraseBudget has passed or none is
// left. When none is left it ends the erasure in the same transaction
// (endErasure) and reports done.
func (s *Store) eraseChunk(ctx context.Context, tenant, user string, background bool) (done bool, err error) {
	err = s.inWriteAs(ctx, background, func(tx *sql.Tx) error {
		var erasedAt int64
		err := tx.QueryRowContext(ctx, `SELECT erased_at FROM user_erasures WHERE tenant = ? AND user_id = ?`,
			tenant, user).Scan(&erasedAt)
		if errors.Is(err, sql.ErrNoRows) { // another process ended it
			done = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("read erasure under way: %w", err)
		}
		start := time.Now()
		// drain runs query, which deletes a batch of what, until it
		// deletes nothing (false) or the budget has passed (true).
		drain := func(what, query string, args ...any) (bool, error) {
			for {
				r, err := tx.ExecContext(ctx, query, args...)
				if err != nil {
					return false, fmt.Errorf("delete %s: %w", what, err)
				}
				if n, err := r.RowsAffected(); err != nil || n == 0 {
					return false, err
				}
				if time.Since(start) >= s.eraseBudget {
					return true, nil
				}
			}
		}
		for _, step := range eraseSteps {
			more, err := drain(step.table, `DELETE FROM `+step.table+` WHERE tenant = ?1 AND user_id = ?2
				AND (`+step.key+`) IN (SELECT `+step.key+` FROM `+step.table+` WHERE tenant = ?1 AND user_id = ?2 LIMIT ?3)`,
				tenant, user, step.batch)
			if more || err != nil {
				return err
			}
		}
		// The provider states bound to the user (provider_states, by its
		// tombstone key): what it created at the provider is no one's.
		digest := contract.UserTombstone(tenant, user)
		if more, err := drain("provider states", `DELETE FROM provider_states WHERE owner = ?1
			AND digest IN (SELECT digest FROM provider_states WHERE owner = ?1 LIMIT ?2)`,
			digest, eraseBatch); more || err != nil {
			return err
		}
		// The background responses held for their answer: never stored
		// now (a claim that took one before is refused by the tombstone).
		if more, err := drain("held responses", `DELETE FROM held_responses WHERE owner = ?1
			AND digest IN (SELECT digest FROM held_responses WHERE owner = ?1 LIMIT ?2)`,
			digest, eraseBatch); more || err != nil {
			return err
		}
		// The conversations' tombstones dated by the erasure: the user's
		// covers them. A conversation deleted since keeps its own.
		more, err := drain("conversation tombstones", `DELETE FROM conversation_tombstones WHERE user_digest = ?1
			AND digest IN (SELECT digest FROM conversation_tombstones WHERE user_digest = ?1 AND deleted_at <= ?2 LIMIT ?3)`,
			digest, erasedAt, eraseBatch)
		if more || err != nil {
			return err
		}
		done = true
		return endErasure(ctx, tx, tenant, user, erasedAt)
	})
	if err != nil {
		return false, fmt.Errorf("erase chunk: %w", err)
	}
	return done, nil
}

// endErasure ends the erasure of (tenant, user), in the transaction of its
// last chunk: the revision counters the chunks' deletes moved go into the
// tombstone (entomb), and the user reads as stored again.
func endErasure(ctx context.Context, tx *sql.Tx, tenant, user string, erasedAt int64) error {
	if err := entomb(ctx, tx, tenant, user, erasedAt); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_erasures WHERE tenant = ? AND user_id = ?`, tenant, user); err != nil {
		return fmt.Errorf("end erasure: %w", err)
	}
	return nil
}

// errErasing refuses, for a retry, a write about a user whose erasure is
// under way that the erasure does not cover (dated after it began): the
// erasure's next chunk would delete it.
var errErasing = fmt.Errorf("an erasure of the user is under way: %w", memory.ErrUnavailable)

// erasing reports whether an erasure of (tenant, user) is under way: its
// rows, being deleted, are not to be read. A read checks it in the
// snapshot it read them in: in its statement (notErasing), or on the read
// transaction it read them on (unlessErasing). A check in a statement of
// its own, after the read, is not enough: a read made while the erasure
// was under way, checked once it has ended, would answer rows of an
// erased user.
func erasing(ctx context.Context, q querier, tenant, user string) (bool, error) {
	var under bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM user_erasures WHERE tenant = ? AND user_id = ?)`,
		tenant, user).Scan(&under); err != nil {
		return false, fmt.Errorf("check erasure under way: %w", err)
	}
	return under, nil
}

// notErasing is a condition on table's rows (a table with tenant and
// user_id) that holds unless an erasure of their user is under way: the
// request path's reads add it to their statement, so it is checked in
// their snapshot at no extra query.
func notErasing(table string) string {
	return ` AND NOT EXISTS (SELECT 1 FROM user_erasures WHERE user_erasures.tenant = ` + table + `.tenant
		AND user_erasures.user_id = ` + table + `.user_id)`
}

// unlessErasing runs read, a read of several statements, in one read
// transaction on db, and returns what it read, or none when an erasure of
// (tenant, user) is under way in the same snapshot (erasing).
func unlessErasing[T any](ctx context.Context, db *sql.DB, tenant, user string, none T, read func(q querier) (T, error)) (T, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return none, err
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to undo
	v, err := read(tx)
	if err != nil {
		return none, err
	}
	if under, err := erasing(ctx, tx, tenant, user); err != nil || under {
		return none, err
	}
	return v, nil
}

// resumeErasures finishes, in the background, the erasures user_erasures
// lists whenever resume is called (Open calls it once), until stop.
func (s *Store) resumeErasures(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	// retry is the wait before a failed round is made again, doubling up
	// to a minute: a user's new turns wait for the erasure to end
	// (errErasing), so a failed round is not left to the next wake.
	retry := time.Second
	for {
		select {
		case <-stop:
			return
		case <-s.wake:
		}
		type erasure struct{ tenant, user string }
		var pending []erasure
		var e erasure
		err := eachRow(ctx, s.read, `SELECT tenant, user_id FROM user_erasures`, nil, []any{&e.tenant, &e.user},
			func() error { pending = append(pending, e); return nil })
		for _, e := range pending {
			if err == nil {
				err = s.finishErasure(ctx, e.tenant, e.user, true)
			}
		}
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("sqlite: an erasure under way is not finished; the user stays erased, the rest of the rows are deleted in a later round",
				"err", err, "retry_in", retry)
			if pace.Sleep(ctx, retry) {
				s.resume()
			}
			retry = min(2*retry, time.Minute)
			continue
		}
		retry = time.Second
		if len(pending) > 0 && err == nil {
			s.logger.Info("finished erasures under way", "users", len(pending))
		}
	}
}

// resume wakes resumeErasures (a wake already pending does).
func (s *Store) resume() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// readHook calls the tests' afterRead hook, if any.
func (s *Store) readHook() {
	if s.afterRead != nil {
		s.afterRead()
	}
}
