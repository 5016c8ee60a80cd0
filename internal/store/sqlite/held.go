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

// HoldResponse keeps h until SettleResponse deletes it (storetest.RunHeld): a
// row of held_responses keyed by memory.HeldDigest of its tenant and
// response id, in one of the writer's transactions, refused with
// memory.ErrErased when the user was erased at or after h.At, with
// memory.ErrHeldDeleted when its conversation was deleted at or after
// h.Received (contract.DeletedSince, as a save), and with
// memory.ErrHeldTooLarge past memory.HeldExchangeMaxBytes. A row of the
// same key is replaced. It then gives up the rows lapsed by h.Now (up to
// contract.ExpiredStates) and the tenant's oldest past memory.HeldMax
// rows or memory.HeldMaxBytes bytes, none under a claim's lease at h.Now
// (counted first, as the newest), and returns how many it gave up.
func (s *Store) HoldResponse(ctx context.Context, h memory.HeldResponse) (int, error) {
	if len(h.Exchange) > memory.HeldExchangeMaxBytes {
		return 0, fmt.Errorf("hold response: %w", memory.ErrHeldTooLarge)
	}
	given := 0
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		given = 0
		if err := guard(ctx, tx, h.Tenant, h.User, h.At); err != nil {
			return err
		}
		deleted, err := deletedAt(ctx, tx, h.Identity)
		if err != nil {
			return err
		}
		if contract.DeletedSince(memory.Exchange{Received: h.Received}, deleted) {
			return memory.ErrHeldDeleted
		}
		tenant := memory.HeldDigest(h.Tenant, "")
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO held_responses
			(digest, tenant_digest, owner, conversation, exchange, size, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			memory.HeldDigest(h.Tenant, h.ID), tenant, contract.UserTombstone(h.Tenant, h.User),
			contract.ConversationTombstone(h.Identity), h.Exchange, len(h.Exchange), nanos(h.At), nanos(h.Expires)); err != nil {
			return err
		}
		for _, q := range []struct {
			query string
			args  []any
		}{
			{`DELETE FROM held_responses WHERE digest IN
				(SELECT digest FROM held_responses WHERE expires_at <= ?1 AND claimed_until <= ?1 LIMIT ?2)`,
				[]any{nanos(h.Now), contract.ExpiredStates}},
			{`DELETE FROM held_responses WHERE digest IN (SELECT digest FROM
				(SELECT digest, claimed_until, ROW_NUMBER() OVER newest AS n, SUM(size) OVER newest AS bytes
				FROM held_responses WHERE tenant_digest = ?1
				WINDOW newest AS (ORDER BY claimed_until > ?4 DESC, created_at DESC, digest ROWS UNBOUNDED PRECEDING))
				WHERE (n > ?2 OR bytes > ?3) AND claimed_until <= ?4)`,
				[]any{tenant, memory.HeldMax, memory.HeldMaxBytes, nanos(h.Now)}},
		} {
			r, err := tx.ExecContext(ctx, q.query, q.args...)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			given += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("hold response: %w", err)
	}
	return given, nil
}

// HeldOwner returns the owner (contract.UserTombstone) of tenant's held
// response id, or memory.ErrNotFound when none is held, or it lapsed by
// now.
func (s *Store) HeldOwner(ctx context.Context, tenant, id string, now time.Time) ([]byte, error) {
	var owner []byte
	err := s.read.QueryRowContext(ctx, `SELECT owner FROM held_responses WHERE digest = ? AND expires_at > ?`,
		memory.HeldDigest(tenant, id), nanos(now)).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, memory.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("held response: %w", err)
	}
	return owner, nil
}

// ClaimResponse takes tenant's held response id of owner under a lease
// until until: the row, not under another claim's lease at now, is
// leased in the statement that reads it, so of claims made at once one
// alone gets it; memory.ErrNotFound when none is held or it is leased.
// The row stays until SettleResponse deletes it. A lapsed one is taken
// all the same, its expiry telling the caller.
func (s *Store) ClaimResponse(ctx context.Context, tenant, id string, owner []byte, now, until time.Time) (memory.HeldResponse, error) {
	var (
		h       memory.HeldResponse
		expires int64
	)
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `UPDATE held_responses SET claimed_until = ?
			WHERE digest = ? AND owner = ? AND claimed_until <= ? RETURNING exchange, expires_at`,
			nanos(until), memory.HeldDigest(tenant, id), owner, nanos(now)).Scan(&h.Exchange, &expires)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return h, memory.ErrNotFound
	}
	if err != nil {
		return h, fmt.Errorf("claim held response: %w", err)
	}
	h.Expires = time.Unix(0, expires)
	return h, nil
}

// SettleResponse deletes tenant's held response id of owner; none held
// is no error.
func (s *Store) SettleResponse(ctx context.Context, tenant, id string, owner []byte) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM held_responses WHERE digest = ? AND owner = ?`, memory.HeldDigest(tenant, id), owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("settle held response: %w", err)
	}
	return nil
}
