package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// querier is what the read helpers need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// times scans timestamptz as it is, in UTC (Open's AfterConnect).
type times struct{}

func (times) Dest(t *time.Time) any      { return t }
func (times) NullDest(t **time.Time) any { return t }

// collect runs sql on q and returns its rows as scan reads them (none: an
// empty slice), a connection failure marked memory.ErrUnavailable.
func collect[T any](ctx context.Context, q querier, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, scan)
	return out, unavailable(err)
}

// liveMessagesSQL selects the live messages of the conversation ($1
// tenant, $2 user, $3 conversation) in the columns queryMessages reads; a
// query adds its conditions, order and limit.
const liveMessagesSQL = `SELECT ` + contract.MessageColumns + ` FROM messages
	WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NULL`

// queryMessages runs a query whose first three parameters are the tenant,
// user and conversation of id, followed by args, and whose columns are
// contract.MessageColumns.
func queryMessages(ctx context.Context, q querier, id memory.Identity, sql string, args ...any) ([]memory.Message, error) {
	return collect(ctx, q, func(row pgx.CollectableRow) (memory.Message, error) { return contract.ScanMessage(row, times{}, id) },
		sql, append([]any{id.Tenant, id.User, id.Conversation}, args...)...)
}

// Recent returns up to n newest live messages of the conversation, oldest
// first; an unknown conversation has none.
func (s *Store) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	defer telemetry.Span(&ctx, "postgres.Recent")()
	if n <= 0 {
		return nil, nil
	}
	msgs, err := queryMessages(ctx, s.pool, id, liveMessagesSQL+` ORDER BY seq DESC LIMIT $4`, n)
	if err != nil {
		return nil, fmt.Errorf("postgres: recent: %w", err)
	}
	slices.Reverse(msgs)
	return msgs, nil
}

// Conversations lists a user's conversations in the tenant, most recently
// updated first (ties by id), with their live message counts.
func (s *Store) Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error) {
	defer telemetry.Span(&ctx, "postgres.Conversations")()
	cs, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (memory.Conversation, error) {
		c := memory.Conversation{Tenant: tenant, User: user}
		return c, row.Scan(&c.ID, &c.CreatedAt, &c.UpdatedAt, &c.MessageCount)
	}, `SELECT c.id, c.created_at, c.updated_at, c.message_count
		FROM conversations c
		WHERE c.tenant = $1 AND c.user_id = $2
		ORDER BY c.updated_at DESC, c.id`, tenant, user)
	if err != nil {
		return nil, fmt.Errorf("postgres: list conversations: %w", err)
	}
	return cs, nil
}

// Conversation returns one conversation and all its live messages in Seq
// order, read from one snapshot, or memory.ErrNotFound.
func (s *Store) Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	return s.ConversationPage(ctx, id, memory.Page{})
}

// ConversationPage returns one conversation, its live message count (kept
// by triggers, migration 0037) and a page of its live messages in Seq
// order (memory.Page), read from one snapshot, or memory.ErrNotFound.
func (s *Store) ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error) {
	defer telemetry.Span(&ctx, "postgres.ConversationPage")()
	c := memory.Conversation{Tenant: id.Tenant, User: id.User, ID: id.Conversation}
	var msgs []memory.Message
	var limit any // NULL: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT c.created_at, c.updated_at, c.message_count
			FROM conversations c
			WHERE c.tenant = $1 AND c.user_id = $2 AND c.id = $3`,
			id.Tenant, id.User, id.Conversation).Scan(&c.CreatedAt, &c.UpdatedAt, &c.MessageCount)
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrNotFound
		}
		if err != nil {
			return unavailable(err)
		}
		if p.Backward {
			msgs, err = queryMessages(ctx, tx, id, liveMessagesSQL+` AND seq < $4 ORDER BY seq DESC LIMIT $5`, p.Before, limit)
			slices.Reverse(msgs)
			return err
		}
		msgs, err = queryMessages(ctx, tx, id, liveMessagesSQL+` AND seq > $4 ORDER BY seq LIMIT $5`, p.After, limit)
		return err
	})
	if err != nil {
		return memory.Conversation{}, nil, fmt.Errorf("postgres: conversation %s: %w", id.Conversation, unavailable(err))
	}
	return c, msgs, nil
}
