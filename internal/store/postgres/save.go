package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// alignSlack is how many live messages beyond the length of the client's
// resent history SaveExchange compares it with.
const alignSlack = 64

// errFinished ends a transaction early with a rollback after the result
// (Duplicate or Dropped) has been decided.
var errFinished = errors.New("exchange needs no write")

// userLockSQL takes a transaction-scoped advisory lock on a (tenant, user):
// shared while an exchange is saved, exclusive while the user is erased, so
// an erasure never interleaves with a capture. Ids cannot contain '/'.
const userLockSQL = "SELECT pg_advisory_xact_lock%s(hashtextextended($1 || '/' || $2, 3))"

// SaveExchange stores ex in one transaction, following the storetest.Store
// contract: an exchange that only appends (appendsOnly) in one round trip
// (saveTurn), others in a transaction of several. Saves to the same conversation are serialized by a row lock on
// the conversation; a redelivered exchange returns Duplicate and writes
// nothing; an exchange of a user erased at or after ex.At returns Dropped.
func (s *Store) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	defer telemetry.Span(&ctx, "postgres.SaveExchange")()
	if err := validExchange(ex); err != nil {
		return memory.SaveResult{}, err
	}
	at := ex.At
	if at.IsZero() {
		at = time.Now()
	}
	if appendsOnly(ex) {
		return s.saveTurn(ctx, ex, at)
	}
	var res memory.SaveResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = saveExchange(ctx, tx, ex, at)
		if err == nil && (res.Duplicate || res.Dropped) {
			return errFinished
		}
		return err
	})
	switch {
	case errors.Is(err, errFinished):
		return res, nil
	case isUniqueViolation(err, messageKeyConstraint):
		// A concurrent save of the same exchange won.
		return memory.SaveResult{Duplicate: true}, nil
	case err != nil:
		return memory.SaveResult{}, fmt.Errorf("postgres: save exchange %s: %w", ex.ID, permanent(err))
	}
	return res, nil
}

// saveExchange is SaveExchange's transaction body.
func saveExchange(ctx context.Context, tx pgx.Tx, ex memory.Exchange, at time.Time) (memory.SaveResult, error) {
	id := ex.Identity
	if _, err := tx.Exec(ctx, fmt.Sprintf(userLockSQL, "_shared"), id.Tenant, id.User); err != nil {
		return memory.SaveResult{}, fmt.Errorf("lock user: %w", unavailable(err))
	}
	var erased bool
	if err := tx.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM erasures WHERE tenant = $1 AND user_id = $2 AND erased_at >= $3)`,
		id.Tenant, id.User, at).Scan(&erased); err != nil {
		return memory.SaveResult{}, fmt.Errorf("check erasure: %w", unavailable(err))
	}
	if erased {
		return memory.SaveResult{Dropped: true}, nil
	}

	// The upsert locks the conversation row until commit: concurrent saves
	// to this conversation queue here, and each sees the previous one's rows.
	var lastSeq int64
	if err := tx.QueryRow(ctx, `
		INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (tenant, user_id, id) DO UPDATE SET last_seq = conversations.last_seq
		RETURNING last_seq`,
		id.Tenant, id.User, id.Conversation, at).Scan(&lastSeq); err != nil {
		return memory.SaveResult{}, fmt.Errorf("lock conversation: %w", unavailable(err))
	}

	// An exchange stored in the default conversation may since have moved
	// to its candidate conversation (see Adopt).
	moved := id.Conversation
	if ex.Candidate != "" {
		moved = ex.Candidate
	}
	var dup bool
	if err := tx.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM messages WHERE tenant = $1 AND user_id = $2 AND conversation IN ($3, $5) AND key = $4)`,
		id.Tenant, id.User, id.Conversation, memory.Key(ex.ID, 0), moved).Scan(&dup); err != nil {
		return memory.SaveResult{}, fmt.Errorf("check duplicate: %w", unavailable(err))
	}
	if dup {
		return memory.SaveResult{Duplicate: true}, nil
	}

	var plan memory.Plan
	if len(ex.Prior) > 0 {
		tail, err := queryMessages(ctx, tx, id, `
			SELECT seq, key, role, content, raw, tokens, created_at FROM messages
			WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NULL
			ORDER BY seq DESC LIMIT $4`, len(ex.Prior)+alignSlack)
		if err != nil {
			return memory.SaveResult{}, fmt.Errorf("load tail: %w", err)
		}
		slices.Reverse(tail)
		plan = memory.Align(tail, ex.Prior)
	}

	var res memory.SaveResult
	if plan.SupersedeFrom > 0 {
		// The replaced branch leaves recall with it: its messages' items are
		// deleted in this transaction. AddItems takes a share lock on the
		// conversation row (which this transaction holds exclusively since
		// the upsert above) before it checks that a message is live, so a
		// late index either commits before this delete sees its rows or
		// sees the messages superseded and skips them.
		if err := tx.QueryRow(ctx, supersedeSQL,
			id.Tenant, id.User, id.Conversation, plan.SupersedeFrom, at).Scan(&res.Superseded); err != nil {
			return memory.SaveResult{}, fmt.Errorf("supersede: %w", unavailable(err))
		}
	}

	msgs := make([]memory.Message, 0, len(plan.Prior)+len(ex.Turn)+1)
	msgs = append(msgs, plan.Prior...)
	msgs = append(msgs, ex.Turn...)
	msgs = append(msgs, ex.Reply)
	b := &pgx.Batch{}
	res.Stored = make([]memory.Message, len(msgs))
	for i, m := range msgs {
		created := m.CreatedAt
		if created.IsZero() {
			created = at
		}
		var raw any
		if len(m.Raw) > 0 {
			raw = m.Raw
		}
		res.Stored[i] = asStored(memory.Message{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
			Seq: lastSeq + int64(i) + 1, Key: memory.Key(ex.ID, i), Role: m.Role, Content: m.Content, Raw: m.Raw,
			Tokens: m.Tokens, CreatedAt: created})
		b.Queue(`
			INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			id.Tenant, id.User, id.Conversation, lastSeq+int64(i)+1, memory.Key(ex.ID, i),
			m.Role, m.Content, raw, m.Tokens, created)
	}
	b.Queue(`
		UPDATE conversations SET last_seq = $4, updated_at = GREATEST(updated_at, $5)
		WHERE tenant = $1 AND user_id = $2 AND id = $3`,
		id.Tenant, id.User, id.Conversation, lastSeq+int64(len(msgs)), at)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return memory.SaveResult{}, fmt.Errorf("insert messages: %w", unavailable(err))
	}
	res.Inserted = len(msgs)
	return res, nil
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

// validExchange checks the identity and id an exchange is stored under.
func validExchange(ex memory.Exchange) error {
	for _, f := range []struct{ name, v string }{
		{"tenant", ex.Tenant}, {"user", ex.User}, {"conversation", ex.Conversation},
	} {
		if !memory.ValidID(f.v) {
			return fmt.Errorf("postgres: %w: bad %s id %q", memory.ErrInvalid, f.name, f.v)
		}
	}
	if ex.ID == "" {
		return fmt.Errorf("postgres: %w: exchange without id", memory.ErrInvalid)
	}
	if ex.Reply.Role == "" {
		return fmt.Errorf("postgres: %w: exchange %s has no reply", memory.ErrInvalid, ex.ID)
	}
	return nil
}

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
