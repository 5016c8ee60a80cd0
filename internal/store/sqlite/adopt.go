package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// RecordCandidate notes that the exchange exchangeID, stored in id (the
// user's default conversation), would be continued by a full-history
// request deriving conversation candidate (see memory.Exchange.Candidate),
// so that Adopt can move it there.
func (s *Store) RecordCandidate(ctx context.Context, id memory.Identity, exchangeID, candidate string) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO conversation_candidates
			(tenant, user_id, conversation, candidate, first_key, at)
			SELECT tenant, user_id, conversation, ?, key, ? FROM messages
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND key = ?
			ON CONFLICT DO NOTHING`,
			candidate, nanos(time.Now()), id.Tenant, id.User, id.Conversation, memory.Key(exchangeID, 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("record candidate: %w", err)
	}
	return nil
}

// Adopt moves into conversation to — when it holds no message yet — the
// exchanges of the user's default conversation recorded with candidate
// to.Conversation that the resent history prior starts with
// (memory.Adoptable), all in one write transaction: their messages (renumbered
// 1..n in to, keys kept), their exchange records and their recall items;
// the candidate records of the moved exchanges go, and so does the default
// conversation when nothing is left in it. Exchanges a summary of the
// default conversation already covers stay. It returns how many messages
// moved (0 when nothing matched).
func (s *Store) Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error) {
	if err := contract.ValidIdentity(to); err != nil || len(prior) == 0 || to.Conversation == memory.DefaultConversation {
		return 0, err
	}
	// Every later turn of a chat asks again: its conversation holds
	// messages by then, which a read tells without taking the writer.
	var one int
	err := s.reads.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ? LIMIT 1`,
		to.Tenant, to.User, to.Conversation).Scan(&one)
	switch {
	case err == nil:
		return 0, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("adopt into %s: %w", to.Conversation, err)
	}
	moved := 0
	err = s.inWrite(ctx, func(tx *sql.Tx) error {
		var err error
		moved, err = adopt(ctx, tx, to, prior)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("adopt into %s: %w", to.Conversation, err)
	}
	return moved, nil
}

func adopt(ctx context.Context, tx *sql.Tx, to memory.Identity, prior []memory.Message) (int, error) {
	from := to
	from.Conversation = memory.DefaultConversation
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ? LIMIT 1`,
		to.Tenant, to.User, to.Conversation).Scan(&one)
	switch {
	case err == nil:
		return 0, nil // to has messages of its own: nothing is adopted
	case !errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("check conversation: %w", err)
	}
	var covered int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(to_seq), 0) FROM summaries
		WHERE tenant = ? AND user_id = ? AND conversation = ?`, from.Tenant, from.User, from.Conversation).Scan(&covered); err != nil {
		return 0, fmt.Errorf("check summary: %w", err)
	}
	// The newest recorded exchange whose run matches wins.
	starts, err := queryAll(ctx, tx, scanInt64, `SELECT m.seq FROM conversation_candidates c
		JOIN messages m ON m.tenant = c.tenant AND m.user_id = c.user_id AND m.conversation = c.conversation
			AND m.key = c.first_key AND m.superseded_at IS NULL
		WHERE c.tenant = ? AND c.user_id = ? AND c.conversation = ? AND c.candidate = ? AND m.seq > ?
		ORDER BY m.seq DESC`, from.Tenant, from.User, from.Conversation, to.Conversation, covered)
	if err != nil {
		return 0, fmt.Errorf("find candidates: %w", err)
	}
	var run []memory.Message
	for _, start := range starts {
		r, err := tx.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND superseded_at IS NULL AND seq >= ?
			ORDER BY seq LIMIT ?`, from.Tenant, from.User, from.Conversation, start, len(prior)+1)
		if err != nil {
			return 0, fmt.Errorf("load candidate: %w", err)
		}
		stored, err := scanMessages(r, from)
		if err != nil {
			return 0, fmt.Errorf("load candidate: %w", err)
		}
		if n := memory.Adoptable(stored, prior); n > 0 {
			run = stored[:n]
			break
		}
	}
	if len(run) == 0 {
		return 0, nil
	}
	now := nanos(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, to.Tenant, to.User, to.Conversation, now, now); err != nil {
		return 0, fmt.Errorf("create conversation: %w", err)
	}
	exchanges := map[string]bool{}
	for i, m := range run {
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET conversation = ?, seq = ?
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND key = ?`,
			to.Conversation, i+1, from.Tenant, from.User, from.Conversation, m.Key); err != nil {
			return 0, fmt.Errorf("move message: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memory_items SET conversation = ?
			WHERE tenant = ? AND user_id = ? AND kind = 'message' AND source = ?`,
			to.Conversation, to.Tenant, to.User, m.Key); err != nil {
			return 0, fmt.Errorf("move items: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_candidates
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND first_key = ?`,
			from.Tenant, from.User, from.Conversation, m.Key); err != nil {
			return 0, fmt.Errorf("drop candidate: %w", err)
		}
		exchanges[memory.ExchangeOf(m.Key)] = true
	}
	for ex := range exchanges {
		if _, err := tx.ExecContext(ctx, `UPDATE exchanges SET conversation = ?
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND id = ?`,
			to.Conversation, from.Tenant, from.User, from.Conversation, ex); err != nil {
			return 0, fmt.Errorf("move exchange: %w", err)
		}
	}
	last := nanos(run[len(run)-1].CreatedAt)
	for _, c := range []struct {
		conv  string
		delta int
	}{{from.Conversation, -len(run)}, {to.Conversation, len(run)}} {
		if _, err := tx.ExecContext(ctx, `UPDATE conversations
			SET message_count = message_count + ?, updated_at = MAX(updated_at, ?)
			WHERE tenant = ? AND user_id = ? AND id = ?`, c.delta, last, to.Tenant, to.User, c.conv); err != nil {
			return 0, fmt.Errorf("update conversation: %w", err)
		}
	}
	// A default conversation that held nothing but the chat's first turns
	// goes with them.
	if _, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE tenant = ? AND user_id = ? AND id = ?
		AND NOT EXISTS (SELECT 1 FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?)`,
		from.Tenant, from.User, from.Conversation, from.Tenant, from.User, from.Conversation); err != nil {
		return 0, fmt.Errorf("drop empty conversation: %w", err)
	}
	if err := adoptFactSources(ctx, tx, from, to); err != nil {
		return 0, err
	}
	return len(run), nil
}

// Continued reports whether the conversation ex.Candidate starts with ex's
// turn and reply (by fingerprint): ex, a full-history chat's first turn,
// was stored there already, as the history its continuation resent, when
// the continuation was stored first.
func (s *Store) Continued(ctx context.Context, ex memory.Exchange) (bool, error) {
	if ex.Candidate == "" {
		return false, nil
	}
	id := ex.Identity
	id.Conversation = ex.Candidate
	want := append(append([]memory.Message(nil), ex.Turn...), ex.Reply)
	rows, err := s.reads.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE tenant = ? AND user_id = ? AND conversation = ? AND superseded_at IS NULL
		ORDER BY seq LIMIT ?`, id.Tenant, id.User, id.Conversation, len(want))
	if err != nil {
		return false, fmt.Errorf("continued: %w", err)
	}
	stored, err := scanMessages(rows, id)
	if err != nil {
		return false, fmt.Errorf("continued: %w", err)
	}
	return memory.StartsWith(stored, want), nil
}
