package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// userLockSQL takes a transaction-scoped advisory lock on a (tenant, user):
// shared while an exchange is saved, exclusive while the user is erased, so
// an erasure never interleaves with a capture. Ids cannot contain '/'.
const userLockSQL = "SELECT pg_advisory_xact_lock%s(hashtextextended($1 || '/' || $2, 3))"

// SaveExchange stores ex as SaveExchanges stores a batch of one (see
// storetest.Store): the one save path. A concurrent save of the same
// exchange that won makes it a Duplicate.
func (s *Store) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := s.SaveExchanges(ctx, []memory.Exchange{ex})
	switch {
	case isUniqueViolation(err, messageKeyConstraint):
		return memory.SaveResult{Duplicate: true}, nil
	case err != nil:
		return memory.SaveResult{}, err
	}
	return res[0], nil
}

// asStored returns m, about to be inserted, as Recent reads it back: its
// time in UTC at PostgreSQL's microsecond precision (pgx truncates), no
// Raw when it has none (stored as NULL), and no reasoning-free copy taken
// (Raw is shared).
func asStored(m memory.Message) memory.Message {
	m.CreatedAt = m.CreatedAt.Truncate(time.Microsecond).UTC()
	if len(m.Raw) == 0 {
		m.Raw = nil
	}
	return m
}

// supersedeSQL marks a conversation's live messages from seq $4 on
// superseded at $5 and deletes their recall items, answering how many were
// superseded; $1–$3 are tenant, user and conversation.
const supersedeSQL = `
	WITH superseded AS (
		UPDATE messages SET superseded_at = $5
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq >= $4 AND superseded_at IS NULL
		RETURNING key
	), items AS (
		DELETE FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND kind = 'message' AND source IN (SELECT key FROM superseded)
	)
	SELECT count(*) FROM superseded`

// messageKeyConstraint makes a message key unique in its conversation.
const messageKeyConstraint = "messages_conversation_key"

// permanent marks errors that no retry can fix — PostgreSQL's data
// exceptions (class 22: text it cannot hold, such as a NUL byte, SQLSTATE
// 22021) and integrity violations (class 23) — with memory.ErrInvalid, so
// capture sets the exchange aside instead of retrying it forever.
func permanent(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) &&
		!isUniqueViolation(err, messageKeyConstraint) && !errors.Is(err, memory.ErrInvalid) {
		return fmt.Errorf("%w: %w", memory.ErrInvalid, err)
	}
	return err
}

// isUniqueViolation reports whether err is a unique violation of constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// Results of memgate_save_turn other than a first seq.
const (
	turnErased    = -1
	turnDuplicate = -2
)

// saveTurn stores an exchange that only appends (SaveExchanges) in one round
// trip (migration 0026's memgate_append_received over 0022's
// memgate_append_turn, a statement that commits on its own, which checks
// the conversation's deletion, the erasure and the duplicate as PlanSave
// would), with SaveExchange's results, the count before it (TailBefore)
// included.
func (s *Store) saveTurn(ctx context.Context, ex memory.Exchange, at time.Time) (memory.SaveResult, error) {
	// Planned into an empty conversation: seqs 1..n, moved after the
	// conversation's last seq once the statement tells it.
	res := contract.PlanSave(ex, at, time.Time{}, false, &contract.SaveConv{}).Result
	var w batchWriter
	for _, m := range res.Stored {
		w.message(m, memory.Stamp{}) // no history resent: no Stamp
	}
	var first int64
	var before *int64
	err := s.pool.QueryRow(ctx, `SELECT * FROM memgate_append_received($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		ex.Tenant, ex.User, ex.Conversation, at, receivedArg(ex), w.k, w.role, w.content, w.raw, w.tokens, w.created).Scan(&first, &before)
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

// receivedArg is ex's Received as a query argument: NULL when not set (no
// deletion drops it).
func receivedArg(ex memory.Exchange) *time.Time {
	if ex.Received.IsZero() {
		return nil
	}
	r := ex.Received
	return &r
}
