package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// appendsOnly reports whether ex can be stored by saveTurn: it resends no
// history (nothing to align) and has no candidate conversation (see
// Adopt), so it only appends its turn and reply.
func appendsOnly(ex memory.Exchange) bool {
	return len(ex.Prior) == 0 && ex.Candidate == ""
}

// Results of memgate_save_turn other than a first seq.
const (
	turnErased    = -1
	turnDuplicate = -2
)

// saveTurn stores an exchange for which appendsOnly holds in one round
// trip (migration 0022's memgate_append_turn, a statement that commits on
// its own, which checks the erasure and the duplicate as PlanSave would),
// with SaveExchange's results, the count before it (TailBefore) included.
func (s *Store) saveTurn(ctx context.Context, ex memory.Exchange, at time.Time) (memory.SaveResult, error) {
	// Planned into an empty conversation: seqs 1..n, moved after the
	// conversation's last seq once the statement tells it.
	res := contract.PlanSave(ex, at, time.Time{}, false, &contract.SaveConv{}).Result
	var w batchWriter
	for _, m := range res.Stored {
		w.message(m)
	}
	var first int64
	var before *int64
	err := s.pool.QueryRow(ctx, `SELECT * FROM memgate_append_turn($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		ex.Tenant, ex.User, ex.Conversation, at, w.k, w.role, w.content, w.raw, w.tokens, w.created).Scan(&first, &before)
	switch {
	case isUniqueViolation(err, messageKeyConstraint):
		// A concurrent save of the same exchange won.
		return memory.SaveResult{Duplicate: true}, nil
	case err != nil:
		return memory.SaveResult{}, fmt.Errorf("postgres: save exchange %s: %w", ex.ID, permanent(unavailable(err)))
	case first == turnErased:
		return memory.SaveResult{Dropped: true}, nil
	case first == turnDuplicate:
		return memory.SaveResult{Duplicate: true}, nil
	}
	for i, m := range res.Stored {
		m.Seq += first - 1
		res.Stored[i] = asStored(m)
	}
	if before != nil {
		res.TailBefore, res.TailKnown = *before, true
	}
	return res, nil
}
