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
// keyed by the state's digest (contract.StateDigest), written in one
// transaction under the user's
// erasure guard (memory.ErrErased when the user was erased at or after
// b.At). A state bound already keeps its owner; the same owner's binding
// moves its expiry. It removes up to contract.ExpiredStates bindings
// lapsed by b.At, skipping those another transaction holds.
func (s *Store) BindState(ctx context.Context, b memory.StateBinding) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := guard(ctx, tx, b.Tenant, b.User, b.At); err != nil {
			return err
		}
		owner := contract.UserTombstone(b.Tenant, b.User)
		for _, st := range b.States {
			if _, err := tx.Exec(ctx, `INSERT INTO provider_states (digest, owner, expires_at) VALUES ($1, $2, $3)
				ON CONFLICT (digest) DO UPDATE SET expires_at = GREATEST(provider_states.expires_at, excluded.expires_at)
				WHERE provider_states.owner = excluded.owner`,
				contract.StateDigest(st), owner, b.Expires); err != nil {
				return unavailable(err)
			}
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

// StateBound reports whether provider state st is bound to tenant's user
// and has not lapsed by now (storetest.RunStates).
func (s *Store) StateBound(ctx context.Context, tenant, user string, st memory.ProviderState, now time.Time) (bool, error) {
	var bound bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM provider_states WHERE digest = $1 AND owner = $2 AND expires_at > $3)`,
		contract.StateDigest(st), contract.UserTombstone(tenant, user), now).Scan(&bound); err != nil {
		return false, fmt.Errorf("postgres: provider state bound: %w", unavailable(err))
	}
	return bound, nil
}
