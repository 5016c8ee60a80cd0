package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate/internal/memory"
)

// AddPendingPurge records that the queue purge p is not known to be done
// (memory.PendingPurge): one row per digest, at the later of its times.
// DeleteUser and DeleteConversation record theirs themselves, in the
// tombstone's transaction (owePurge).
func (s *Store) AddPendingPurge(ctx context.Context, p memory.PendingPurge) error {
	if err := owePurge(ctx, s.pool, p); err != nil {
		return fmt.Errorf("postgres: add pending purge: %w", err)
	}
	return nil
}

// owePurge records, through db (a transaction, or the pool), that the
// queue purge p is not known to be done. An erasure and a deletion call
// it in the transaction that writes their tombstone, so that no
// tombstone commits without the purge of the queued turns it voids: a
// process stopping right after the commit leaves the purge to the next
// one's sweep.
func owePurge(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, p memory.PendingPurge) error {
	if _, err := db.Exec(ctx, `INSERT INTO queue_purges AS q (digest, conversation, voided_at) VALUES ($1, $2, $3)
		ON CONFLICT (digest) DO UPDATE SET voided_at = GREATEST(q.voided_at, EXCLUDED.voided_at)`, p.Key, p.Conversation, p.At); err != nil {
		return fmt.Errorf("record the queue purge owed: %w", unavailable(err))
	}
	return nil
}

// PendingPurges returns up to limit of the queue purges not known to be
// done, oldest first.
func (s *Store) PendingPurges(ctx context.Context, limit int) ([]memory.PendingPurge, error) {
	rows, err := s.pool.Query(ctx, `SELECT digest, conversation, voided_at FROM queue_purges ORDER BY voided_at, digest LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: pending purges: %w", unavailable(err))
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.PendingPurge, error) {
		var p memory.PendingPurge
		err := r.Scan(&p.Key, &p.Conversation, &p.At)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: pending purges: %w", unavailable(err))
	}
	return ps, nil
}

// DonePurges records that the purges ps went through: each one's row
// goes unless it was recorded again since with a later time (a later
// erasure, whose purge is still to do).
func (s *Store) DonePurges(ctx context.Context, ps []memory.PendingPurge) error {
	if len(ps) == 0 {
		return nil
	}
	keys, ats := make([][]byte, len(ps)), make([]any, len(ps))
	for i, p := range ps {
		keys[i], ats[i] = p.Key, p.At
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM queue_purges q USING unnest($1::bytea[], $2::timestamptz[]) AS d(digest, at)
		WHERE q.digest = d.digest AND q.voided_at <= d.at`, keys, ats); err != nil {
		return fmt.Errorf("postgres: done purges: %w", unavailable(err))
	}
	return nil
}
