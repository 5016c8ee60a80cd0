package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// querier is what reads need of a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queryAll runs query on q and returns its rows as scan reads them (none:
// an empty slice).
func queryAll[T any](ctx context.Context, q querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// eachRow runs query on q and calls fn with each of its rows scanned into
// dest (a sql.RawBytes there holds until fn returns).
func eachRow(ctx context.Context, q querier, query string, args, dest []any, fn func() error) error {
	_, err := queryAll(ctx, q, func(r rowScanner) (struct{}, error) {
		if err := r.Scan(dest...); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, fn()
	}, query, args...)
	return err
}

// jsonArray encodes v as a JSON array, which json_each reads: a list as
// one parameter. Values of these types always encode.
func jsonArray[T string | int64 | [2]string](v []T) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// liveTail loads the newest n live messages of a conversation in Seq
// order; cond is added to the statement's conditions.
func liveTail(ctx context.Context, q querier, id memory.Identity, n int, cond string) ([]memory.Message, error) {
	msgs, err := queryMessages(ctx, q, id, liveMessagesSQL+cond+` ORDER BY seq DESC LIMIT ?`, n)
	if err != nil {
		return nil, fmt.Errorf("load live tail: %w", err)
	}
	slices.Reverse(msgs)
	return msgs, nil
}

// liveMessagesSQL selects the live messages of a conversation (its tenant,
// user and id the first parameters); a query adds its conditions, order
// and limit.
const liveMessagesSQL = `SELECT ` + contract.MessageColumns + ` FROM messages
	WHERE tenant = ? AND user_id = ? AND conversation = ? AND superseded_at IS NULL`

// queryMessages runs query, whose first parameters are the tenant, user
// and conversation of id followed by args, and reads its rows of
// contract.MessageColumns.
func queryMessages(ctx context.Context, q querier, id memory.Identity, query string, args ...any) ([]memory.Message, error) {
	return queryAll(ctx, q, func(r rowScanner) (memory.Message, error) { return contract.ScanMessage(r, times{}, id) },
		query, append([]any{id.Tenant, id.User, id.Conversation}, args...)...)
}

// Conversations lists a user's conversations, most recently updated first.
// An unknown user has none.
func (s *Store) Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error) {
	defer telemetry.Span(&ctx, "sqlite.Conversations")()
	cs, err := queryAll(ctx, s.reads, func(r rowScanner) (memory.Conversation, error) {
		c := memory.Conversation{Tenant: tenant, User: user}
		return c, r.Scan(&c.ID, &c.MessageCount, (*nanoTime)(&c.CreatedAt), (*nanoTime)(&c.UpdatedAt))
	}, `SELECT id, message_count, created_at, updated_at FROM conversations
		WHERE tenant = ? AND user_id = ?`+notErasing("conversations")+` ORDER BY updated_at DESC, id`, tenant, user)
	s.readHook()
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	return cs, nil
}

// Conversation returns one conversation and all its live messages in Seq
// order, read from one snapshot, or memory.ErrNotFound.
func (s *Store) Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	return s.ConversationPage(ctx, id, memory.Page{})
}

// ConversationPage returns one conversation and a page of its live
// messages in Seq order (memory.Page), read from one snapshot, or
// memory.ErrNotFound.
func (s *Store) ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error) {
	defer telemetry.Span(&ctx, "sqlite.ConversationPage")()
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return memory.Conversation{}, nil, fmt.Errorf("load conversation: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to undo
	c := memory.Conversation{Tenant: id.Tenant, User: id.User, ID: id.Conversation}
	err = tx.QueryRowContext(ctx, `SELECT message_count, created_at, updated_at FROM conversations
		WHERE tenant = ? AND user_id = ? AND id = ?`, id.Tenant, id.User, id.Conversation).
		Scan(&c.MessageCount, (*nanoTime)(&c.CreatedAt), (*nanoTime)(&c.UpdatedAt))
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Conversation{}, nil, fmt.Errorf("conversation %s: %w", id.Conversation, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Conversation{}, nil, fmt.Errorf("load conversation: %w", err)
	}
	q, arg := liveMessagesSQL+` AND seq > ? ORDER BY seq LIMIT ?`, p.After
	if p.Backward {
		q, arg = liveMessagesSQL+` AND seq < ? ORDER BY seq DESC LIMIT ?`, p.Before
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite's "no limit"
	}
	msgs, err := queryMessages(ctx, tx, id, q, arg, limit)
	if err != nil {
		return memory.Conversation{}, nil, fmt.Errorf("load messages: %w", err)
	}
	if p.Backward {
		slices.Reverse(msgs)
	}
	if under, err := erasing(ctx, tx, id.Tenant, id.User); err != nil {
		return memory.Conversation{}, nil, fmt.Errorf("load conversation: %w", err)
	} else if under {
		return memory.Conversation{}, nil, fmt.Errorf("conversation %s: %w", id.Conversation, memory.ErrNotFound)
	}
	return c, msgs, nil
}

// Recent returns up to n newest live messages of the conversation, oldest
// first; none (and no error) for n <= 0 or an unknown conversation. The
// engine keeps them in memory (internal/engine/cache.Reads).
func (s *Store) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	defer telemetry.Span(&ctx, "sqlite.Recent")()
	if n <= 0 {
		return []memory.Message{}, nil
	}
	msgs, err := liveTail(ctx, s.reads, id, n, notErasing("messages"))
	if err != nil {
		return nil, fmt.Errorf("recent messages: %w", err)
	}
	return msgs, nil
}
