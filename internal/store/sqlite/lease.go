package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Lease makes consumer the outbox's only consumer for ttl, or renews its
// lease: held reports whether consumer holds the lease now, taken that it
// has just taken it (from nobody, or from a holder whose lease ran out —
// its own included). Several processes may open one database file
// (`gateway serve` and `gateway worker`, two gateways): the capture
// outbox, whose order matters (a conversation's turns are stored in the
// order they were sent), is drained by the lease holder alone, so two
// processes never split a backlog between them; so is the enrichment
// outbox, under a lease of its own (one per outbox, named by its table),
// so that two processes never enrich one conversation at once nor take
// over a round still running. The lease is a row of
// outbox_leases, read and written in one write transaction, so two
// processes never both hold it; once a lease is taken, Claim serves only
// its holder (see claimOnce). A holder that stops renewing (crashed,
// killed) loses it when ttl has passed.
func (o *Outbox) Lease(ctx context.Context, consumer string, ttl time.Duration) (held, taken bool, err error) {
	if consumer == "" || ttl <= 0 {
		return false, false, fmt.Errorf("lease: %w: consumer %q, ttl %s", memory.ErrInvalid, consumer, ttl)
	}
	err = o.s.inWriteAs(ctx, o.drainYields, func(tx *sql.Tx) error {
		held, taken = false, false
		now := time.Now()
		holder, live, err := o.leaseHolder(ctx, tx, now)
		if err != nil {
			return err
		}
		if live && holder != consumer {
			return nil // another consumer holds it
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox_leases (queue, holder, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (queue) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at`,
			o.table, consumer, nanos(now.Add(ttl))); err != nil {
			return err
		}
		held, taken = true, !live
		return nil
	})
	if err != nil {
		return false, false, fmt.Errorf("lease: %w", err)
	}
	return held, taken, nil
}

// Release gives consumer's lease up, if consumer holds it, so that the
// next consumer takes it at once instead of waiting for it to run out. The
// outbox stays leased: the next consumer claims once it takes the lease.
func (o *Outbox) Release(ctx context.Context, consumer string) error {
	err := o.s.inWriteAs(ctx, o.drainYields, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE outbox_leases SET expires_at = 0 WHERE queue = ? AND holder = ?`, o.table, consumer)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// leaseHolder reads the outbox's lease in tx: its holder ("" when none was
// ever taken) and whether it is live (not run out at now).
func (o *Outbox) leaseHolder(ctx context.Context, tx *sql.Tx, now time.Time) (holder string, live bool, err error) {
	var expires int64
	err = tx.QueryRowContext(ctx, `SELECT holder, expires_at FROM outbox_leases WHERE queue = ?`, o.table).Scan(&holder, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read lease: %w", err)
	}
	return holder, expires > nanos(now), nil
}
