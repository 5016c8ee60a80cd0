package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// BindState records that b's provider states belong to b's tenant and user
// until b.Expires (storetest.RunStates): a row of provider_states each,
// keyed by the state's digest (contract.StateDigest), in one of the
// writer's transactions,
// refused with memory.ErrErased when the user was erased at or after b.At.
// A state bound already keeps its owner; the same owner's binding moves
// its expiry. It removes up to contract.ExpiredStates bindings lapsed by
// b.At.
func (s *Store) BindState(ctx context.Context, b memory.StateBinding) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		if err := guard(ctx, tx, b.Tenant, b.User, b.At); err != nil {
			return err
		}
		owner := contract.UserTombstone(b.Tenant, b.User)
		for _, st := range b.States {
			if _, err := tx.ExecContext(ctx, `INSERT INTO provider_states (digest, owner, expires_at) VALUES (?1, ?2, ?3)
				ON CONFLICT (digest) DO UPDATE SET expires_at = MAX(expires_at, excluded.expires_at) WHERE owner = excluded.owner`,
				contract.StateDigest(st), owner, nanos(b.Expires)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM provider_states WHERE digest IN
			(SELECT digest FROM provider_states WHERE expires_at <= ?1 LIMIT ?2)`, nanos(b.At), contract.ExpiredStates)
		return err
	})
	if err != nil {
		return fmt.Errorf("bind provider state: %w", err)
	}
	return nil
}

// StateBound reports whether provider state st is bound to tenant's user
// and has not lapsed by now (storetest.RunStates).
func (s *Store) StateBound(ctx context.Context, tenant, user string, st memory.ProviderState, now time.Time) (bool, error) {
	var bound bool
	if err := s.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM provider_states WHERE digest = ?1 AND owner = ?2 AND expires_at > ?3)`,
		contract.StateDigest(st), contract.UserTombstone(tenant, user), nanos(now)).Scan(&bound); err != nil {
		return false, fmt.Errorf("provider state bound: %w", err)
	}
	return bound, nil
}
