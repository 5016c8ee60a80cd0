package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// HoldResponse keeps h until SettleResponse deletes it (storetest.RunHeld): a
// row of held_responses keyed by memory.HeldDigest of its tenant and
// response id, in one transaction under the user's erasure guard
// (memory.ErrErased when the user was erased at or after h.At), refused
// with memory.ErrHeldDeleted when its conversation was deleted at or
// after h.Received (contract.DeletedSince, as a save), and with
// memory.ErrHeldTooLarge past memory.HeldExchangeMaxBytes. A row of the
// same key is replaced. It then gives up the rows lapsed by h.Now (up to
// contract.ExpiredStates, skipping those another transaction holds) and
// the tenant's oldest past memory.HeldMax rows or memory.HeldMaxBytes
// bytes, none under a claim's lease at h.Now (counted first, as the
// newest; a lease committed while the eviction runs keeps its row), and
// returns how many it gave up.
func (s *Store) HoldResponse(ctx context.Context, h memory.HeldResponse) (int, error) {
	if len(h.Exchange) > memory.HeldExchangeMaxBytes {
		return 0, fmt.Errorf("postgres: hold response: %w", memory.ErrHeldTooLarge)
	}
	given := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		given = 0
		if err := guard(ctx, tx, h.Tenant, h.User, h.At); err != nil {
			return err
		}
		var deleted time.Time // zero when there is no row
		err := tx.QueryRow(ctx, `SELECT deleted_at FROM conversation_tombstones
			WHERE user_digest = memgate_user_tombstone($1, $2) AND digest = memgate_conversation_tombstone($1, $2, $3)`,
			h.Tenant, h.User, h.Conversation).Scan(&deleted)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return unavailable(err)
		}
		if contract.DeletedSince(memory.Exchange{Received: h.Received}, deleted) {
			return memory.ErrHeldDeleted
		}
		tenant := memory.HeldDigest(h.Tenant, "")
		if _, err := tx.Exec(ctx, `INSERT INTO held_responses
			(digest, tenant_digest, owner, conversation, exchange, size, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (digest) DO UPDATE SET tenant_digest = excluded.tenant_digest, owner = excluded.owner,
				conversation = excluded.conversation, exchange = excluded.exchange, size = excluded.size,
				created_at = excluded.created_at, expires_at = excluded.expires_at, claimed_until = NULL`,
			memory.HeldDigest(h.Tenant, h.ID), tenant, contract.UserTombstone(h.Tenant, h.User),
			contract.ConversationTombstone(h.Identity), h.Exchange, len(h.Exchange), h.At, h.Expires); err != nil {
			return unavailable(err)
		}
		// The bounds eviction repeats the lease test on its own row: a claim
		// committed after its snapshot leaves it waiting on the row lock,
		// and READ COMMITTED's recheck re-evaluates only the outer
		// conditions on the row's new version, not the window's.
		for _, q := range []struct {
			query string
			args  []any
		}{
			{`DELETE FROM held_responses WHERE digest IN
				(SELECT digest FROM held_responses WHERE expires_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
				LIMIT $2 FOR UPDATE SKIP LOCKED)`, []any{h.Now, contract.ExpiredStates}},
			{`DELETE FROM held_responses WHERE digest IN (SELECT digest FROM
				(SELECT digest, claimed_until, ROW_NUMBER() OVER newest AS n, SUM(size) OVER newest AS bytes
				FROM held_responses WHERE tenant_digest = $1
				WINDOW newest AS (ORDER BY claimed_until IS NOT NULL AND claimed_until > $4 DESC, created_at DESC, digest
					ROWS UNBOUNDED PRECEDING)) AS t
				WHERE (n > $2 OR bytes > $3) AND (claimed_until IS NULL OR claimed_until <= $4))
				AND (claimed_until IS NULL OR claimed_until <= $4)`,
				[]any{tenant, memory.HeldMax, memory.HeldMaxBytes, h.Now}},
		} {
			tag, err := tx.Exec(ctx, q.query, q.args...)
			if err != nil {
				return unavailable(err)
			}
			given += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: hold response: %w", err)
	}
	return given, nil
}

// HeldOwner returns the owner (contract.UserTombstone) of tenant's held
// response id, or memory.ErrNotFound when none is held, or it lapsed by
// now.
func (s *Store) HeldOwner(ctx context.Context, tenant, id string, now time.Time) ([]byte, error) {
	var owner []byte
	err := s.pool.QueryRow(ctx, `SELECT owner FROM held_responses WHERE digest = $1 AND expires_at > $2`,
		memory.HeldDigest(tenant, id), now).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, memory.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: held response: %w", unavailable(err))
	}
	return owner, nil
}

// ClaimResponse takes tenant's held response id of owner under a lease
// until until: the row, not under another claim's lease at now, is
// leased in the statement that reads it, so of claims made at once one
// alone gets it (the others wait for its lock, then find it leased);
// memory.ErrNotFound when none is held or it is leased. The row stays
// until SettleResponse deletes it. A lapsed one is taken all the same,
// its expiry telling the caller.
func (s *Store) ClaimResponse(ctx context.Context, tenant, id string, owner []byte, now, until time.Time) (memory.HeldResponse, error) {
	var h memory.HeldResponse
	err := s.pool.QueryRow(ctx, `UPDATE held_responses SET claimed_until = $1
		WHERE digest = $2 AND owner = $3 AND (claimed_until IS NULL OR claimed_until <= $4) RETURNING exchange, expires_at`,
		until, memory.HeldDigest(tenant, id), owner, now).Scan(&h.Exchange, &h.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, memory.ErrNotFound
	}
	if err != nil {
		return h, fmt.Errorf("postgres: claim held response: %w", unavailable(err))
	}
	return h, nil
}

// SettleResponse deletes tenant's held response id of owner; none held
// is no error.
func (s *Store) SettleResponse(ctx context.Context, tenant, id string, owner []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM held_responses WHERE digest = $1 AND owner = $2`,
		memory.HeldDigest(tenant, id), owner); err != nil {
		return fmt.Errorf("postgres: settle held response: %w", unavailable(err))
	}
	return nil
}
