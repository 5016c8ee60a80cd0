package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// BindState records that b's provider states belong to b's tenant and user
// until b.Expires (storetest.RunStates): a row of provider_states each,
// keyed by the state's digest (contract.StateDigest), written by one
// statement per stateChunk distinct states in one of the writer's
// transactions,
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
		for ds := range slices.Chunk(contract.NewStateLookup(b.States).Digests, stateChunk) {
			args := []any{owner, nanos(b.Expires)}
			rows := make([]string, len(ds))
			for i, d := range ds {
				args = append(args, d)
				rows[i] = "(?" + strconv.Itoa(len(args)) + ", ?1, ?2)"
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO provider_states (digest, owner, expires_at) VALUES `+strings.Join(rows, ", ")+`
				ON CONFLICT (digest) DO UPDATE SET expires_at = MAX(expires_at, excluded.expires_at) WHERE owner = excluded.owner`, args...); err != nil {
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

// stateChunk bounds the digests one lookup query names.
const stateChunk = 256

// BoundStates reports, for each of sts, whether it is bound to tenant's
// user and has not lapsed by now (storetest.RunStates): one query per
// stateChunk distinct states; none while an erasure of the user is under
// way (each query checks it in its statement): the erasure deletes the
// user's bindings last, and while it is under way they are no one's
// already.
func (s *Store) BoundStates(ctx context.Context, tenant, user string, sts []memory.ProviderState, now time.Time) ([]bool, error) {
	l := contract.NewStateLookup(sts)
	owner := contract.UserTombstone(tenant, user)
	for ds := range slices.Chunk(l.Digests, stateChunk) {
		args := []any{owner, nanos(now), tenant, user}
		for _, d := range ds {
			args = append(args, d)
		}
		found, err := queryAll(ctx, s.read, func(r rowScanner) ([]byte, error) {
			var d []byte
			return d, r.Scan(&d)
		}, `SELECT digest FROM provider_states WHERE owner = ? AND expires_at > ?
			AND NOT EXISTS (SELECT 1 FROM user_erasures WHERE tenant = ? AND user_id = ?)
			AND digest IN (?`+strings.Repeat(", ?", len(ds)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("provider states bound: %w", err)
		}
		for _, d := range found {
			l.Found(d)
		}
	}
	return l.Bound(), nil
}
