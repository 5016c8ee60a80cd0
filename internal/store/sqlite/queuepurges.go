package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// AddPendingPurge records that the queue purge p is not known to be done
// (memory.PendingPurge): one row per digest, at the later of its times.
// DeleteUser and DeleteConversation record theirs themselves, in the
// tombstone's transaction (owePurge).
func (s *Store) AddPendingPurge(ctx context.Context, p memory.PendingPurge) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error { return owePurge(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("add pending purge: %w", err)
	}
	return nil
}

// owePurge records, in tx, that the queue purge p is not known to be
// done. An erasure and a deletion call it in the transaction that writes
// their tombstone, so that no tombstone commits without the purge of the
// queued turns it voids: a process stopping right after the commit
// leaves the purge to the next one's sweep.
func owePurge(ctx context.Context, tx *sql.Tx, p memory.PendingPurge) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO queue_purges (digest, conversation, voided_at) VALUES (?, ?, ?)
		ON CONFLICT (digest) DO UPDATE SET voided_at = MAX(voided_at, excluded.voided_at)`, p.Key, p.Conversation, nanos(p.At)); err != nil {
		return fmt.Errorf("record the queue purge owed: %w", err)
	}
	return nil
}

// PendingPurges returns up to limit of the queue purges not known to be
// done, oldest first.
func (s *Store) PendingPurges(ctx context.Context, limit int) ([]memory.PendingPurge, error) {
	ps, err := queryAll(ctx, s.read, func(r rowScanner) (memory.PendingPurge, error) {
		var p memory.PendingPurge
		return p, r.Scan(&p.Key, &p.Conversation, (*nanoTime)(&p.At))
	}, `SELECT digest, conversation, voided_at FROM queue_purges ORDER BY voided_at, digest LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("pending purges: %w", err)
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
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		for _, p := range ps {
			if _, err := tx.ExecContext(ctx, `DELETE FROM queue_purges WHERE digest = ? AND voided_at <= ?`, p.Key, nanos(p.At)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("done purges: %w", err)
	}
	return nil
}
