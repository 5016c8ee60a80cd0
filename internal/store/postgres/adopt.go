package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// RecordCandidate notes that the exchange exchangeID, stored in id (the
// user's default conversation), would be continued by a full-history
// request deriving conversation candidate (see memory.Exchange.Candidate),
// so that Adopt can move it there.
func (s *Store) RecordCandidate(ctx context.Context, id memory.Identity, exchangeID, candidate string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO conversation_candidates (tenant, user_id, conversation, candidate, first_key, at)
		SELECT tenant, user_id, conversation, $5, key, now() FROM messages
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND key = $4
		ON CONFLICT DO NOTHING`,
		id.Tenant, id.User, id.Conversation, memory.Key(exchangeID, 0), candidate)
	if err != nil {
		return fmt.Errorf("postgres: record candidate: %w", unavailable(err))
	}
	return nil
}

// Adopt moves into conversation to — when it holds no message yet — the
// exchanges of the user's default conversation recorded with candidate
// to.Conversation that the resent history prior starts with
// (memory.Adoptable), all in one transaction that holds the user's
// shared lock (so no erasure interleaves) and both conversations' rows:
// their messages (renumbered 1..n in to, keys kept) and their recall items;
// the candidate records of the moved exchanges go, and so does the default
// conversation when nothing is left in it. Exchanges a summary of the
// default conversation already covers stay. It returns how many messages
// moved (0 when nothing matched).
func (s *Store) Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error) {
	if len(prior) == 0 || to.Conversation == memory.DefaultConversation {
		return 0, nil
	}
	if err := contract.ValidIdentity(to); err != nil {
		return 0, fmt.Errorf("postgres: adopt: %w", err)
	}
	// Every later turn of a chat asks again: its conversation holds
	// messages by then, which a read tells without taking any lock.
	var busy bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE tenant = $1 AND user_id = $2 AND conversation = $3)`,
		to.Tenant, to.User, to.Conversation).Scan(&busy); err != nil {
		return 0, fmt.Errorf("postgres: adopt into %s: %w", to.Conversation, unavailable(err))
	}
	if busy {
		return 0, nil
	}
	moved := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		moved, err = adopt(ctx, tx, to, prior)
		return err
	})
	if errors.Is(err, errNothingToAdopt) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: adopt into %s: %w", to.Conversation, err)
	}
	return moved, nil
}

func adopt(ctx context.Context, tx pgx.Tx, to memory.Identity, prior []memory.Message) (int, error) {
	from := to
	from.Conversation = memory.DefaultConversation
	if _, err := tx.Exec(ctx, fmt.Sprintf(userLockSQL, "_shared"), to.Tenant, to.User); err != nil {
		return 0, fmt.Errorf("lock user: %w", unavailable(err))
	}
	// Lock the default conversation's row first, then to's (created if
	// new): saves to either wait for the move.
	var fromSeq int64
	err := tx.QueryRow(ctx, `SELECT last_seq FROM conversations WHERE tenant = $1 AND user_id = $2 AND id = $3 FOR UPDATE`,
		from.Tenant, from.User, from.Conversation).Scan(&fromSeq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("lock conversation: %w", unavailable(err))
	}
	var toSeq int64
	if err := tx.QueryRow(ctx, `
		INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
		VALUES ($1, $2, $3, now(), now())
		ON CONFLICT (tenant, user_id, id) DO UPDATE SET last_seq = conversations.last_seq
		RETURNING last_seq`, to.Tenant, to.User, to.Conversation).Scan(&toSeq); err != nil {
		return 0, fmt.Errorf("lock conversation: %w", unavailable(err))
	}
	if toSeq > 0 {
		return 0, errNothingToAdopt // to has messages of its own
	}
	var covered int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(to_seq), 0) FROM summaries
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3`, from.Tenant, from.User, from.Conversation).Scan(&covered); err != nil {
		return 0, fmt.Errorf("check summary: %w", unavailable(err))
	}
	rows, err := tx.Query(ctx, `SELECT m.seq FROM conversation_candidates c
		JOIN messages m ON m.tenant = c.tenant AND m.user_id = c.user_id AND m.conversation = c.conversation
			AND m.key = c.first_key AND m.superseded_at IS NULL
		WHERE c.tenant = $1 AND c.user_id = $2 AND c.conversation = $3 AND c.candidate = $4 AND m.seq > $5
		ORDER BY m.seq DESC`, from.Tenant, from.User, from.Conversation, to.Conversation, covered)
	if err != nil {
		return 0, fmt.Errorf("find candidates: %w", unavailable(err))
	}
	starts, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("find candidates: %w", unavailable(err))
	}
	var run []memory.Message
	for _, start := range starts {
		stored, err := queryMessages(ctx, tx, from, `
			SELECT seq, key, role, content, raw, tokens, created_at FROM messages
			WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NULL AND seq >= $4
			ORDER BY seq LIMIT $5`, start, len(prior)+1)
		if err != nil {
			return 0, fmt.Errorf("load candidate: %w", err)
		}
		if n := memory.Adoptable(stored, prior); n > 0 {
			run = stored[:n]
			break
		}
	}
	if len(run) == 0 {
		return 0, errNothingToAdopt
	}
	keys := make([]string, len(run))
	for i, m := range run {
		keys[i] = m.Key
	}
	b := &pgx.Batch{}
	b.Queue(`
		UPDATE messages m SET conversation = $4, seq = k.n
		FROM unnest($5::text[]) WITH ORDINALITY AS k(key, n)
		WHERE m.tenant = $1 AND m.user_id = $2 AND m.conversation = $3 AND m.key = k.key`,
		from.Tenant, from.User, from.Conversation, to.Conversation, keys)
	b.Queue(`UPDATE memory_items SET conversation = $3
		WHERE tenant = $1 AND user_id = $2 AND kind = 'message' AND source = ANY($4)`,
		to.Tenant, to.User, to.Conversation, keys)
	b.Queue(`DELETE FROM conversation_candidates
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND first_key = ANY($4)`,
		from.Tenant, from.User, from.Conversation, keys)
	b.Queue(`UPDATE conversations SET last_seq = $4, updated_at = GREATEST(updated_at, $5)
		WHERE tenant = $1 AND user_id = $2 AND id = $3`,
		to.Tenant, to.User, to.Conversation, int64(len(run)), run[len(run)-1].CreatedAt)
	// A default conversation that held nothing but the chat's first turns
	// goes with them.
	b.Queue(`DELETE FROM conversations c WHERE tenant = $1 AND user_id = $2 AND id = $3
		AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.tenant = $1 AND m.user_id = $2 AND m.conversation = $3)`,
		from.Tenant, from.User, from.Conversation)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("move messages: %w", unavailable(err))
	}
	if err := adoptFactSources(ctx, tx, from, to); err != nil {
		return 0, err
	}
	return len(run), nil
}

// errNothingToAdopt rolls back an Adopt that found nothing to move (the
// conversation row it created with it).
var errNothingToAdopt = errors.New("nothing to adopt")

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
	stored, err := queryMessages(ctx, s.pool, id, `
		SELECT seq, key, role, content, raw, tokens, created_at FROM messages
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NULL
		ORDER BY seq LIMIT $4`, len(want))
	if err != nil {
		return false, fmt.Errorf("postgres: continued: %w", err)
	}
	return memory.StartsWith(stored, want), nil
}
