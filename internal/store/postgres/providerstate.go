package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// BindState records that b's provider states belong to b's tenant and user
// until b.Expires (storetest.RunStates): a row of provider_states each,
// keyed by the state's digest (contract.StateDigest), written by one
// statement, in the digests' order, in one transaction under the user's
// erasure guard (memory.ErrErased when the user was erased at or after
// b.At). A state bound already keeps its owner; the same owner's binding
// moves its expiry. It removes up to contract.ExpiredStates bindings
// lapsed by b.At, skipping those another transaction holds.
func (s *Store) BindState(ctx context.Context, b memory.StateBinding) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := guard(ctx, tx, b.Tenant, b.User, b.At); err != nil {
			return err
		}
		// One statement for every state, each digest once: ON CONFLICT
		// DO UPDATE may not touch a row twice. The rows are written, and
		// locked, in the digests' order: bindings of the same states made
		// at once in other orders (a list read oldest first and newest
		// first) would otherwise deadlock, one of them aborted.
		if _, err := tx.Exec(ctx, `INSERT INTO provider_states (digest, owner, expires_at)
			SELECT d, $2, $3 FROM unnest($1::bytea[]) AS d ORDER BY d
			ON CONFLICT (digest) DO UPDATE SET expires_at = GREATEST(provider_states.expires_at, excluded.expires_at)
			WHERE provider_states.owner = excluded.owner`,
			contract.NewStateLookup(b.States).Digests, contract.UserTombstone(b.Tenant, b.User), b.Expires); err != nil {
			return unavailable(err)
		}
		_, err := tx.Exec(ctx, `DELETE FROM provider_states WHERE digest IN
			(SELECT digest FROM provider_states WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, b.At, contract.ExpiredStates)
		return unavailable(err)
	})
	if err != nil {
		return fmt.Errorf("postgres: bind provider state: %w", err)
	}
	return nil
}

// BoundStates reports, for each of sts, whether it is bound to tenant's
// user and has not lapsed by now (storetest.RunStates), in one query.
func (s *Store) BoundStates(ctx context.Context, tenant, user string, sts []memory.ProviderState, now time.Time) ([]bool, error) {
	l := contract.NewStateLookup(sts)
	rows, err := s.pool.Query(ctx, `SELECT digest FROM provider_states WHERE owner = $1 AND expires_at > $2 AND digest = ANY($3)`,
		contract.UserTombstone(tenant, user), now, l.Digests)
	if err != nil {
		return nil, fmt.Errorf("postgres: provider states bound: %w", unavailable(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("postgres: provider states bound: %w", unavailable(err))
	}
	for _, d := range found {
		l.Found(d)
	}
	return l.Bound(), nil
}
