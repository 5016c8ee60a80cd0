package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// Adopt moves a chat's first turns recorded with candidate (to's own id
// when "") out of the user's default conversation into to (contract.Adopt), in one transaction that holds the user's
// shared lock (so no erasure interleaves) and both conversations' rows.
// Under the chat's lock (fence not zero) it moves only while that hold
// holds it (fenceChats), else fails with memory.ErrLockLost.
func (s *Store) Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error) {
	chat := to
	if candidate != "" {
		chat.Conversation = candidate
	}
	moved, err := contract.Adopt(ctx, to, candidate, prior, received, func(ctx context.Context) (busy bool, err error) {
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE tenant = $1 AND user_id = $2 AND conversation = $3)`,
			to.Tenant, to.User, to.Conversation).Scan(&busy)
		return busy, unavailable(err)
	}, func(fn func(contract.AdoptTx) error) error {
		return s.inTx(ctx, func(tx pgx.Tx) error {
			if err := s.fenceChats(ctx, tx, fence, chat); err != nil {
				return err
			}
			return fn(adoptTx{tx})
		})
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: adopt into %s: %w", to.Conversation, err)
	}
	return moved, nil
}

// adoptTx is Adopt's transaction (contract.AdoptTx).
type adoptTx struct{ tx pgx.Tx }

// Lock takes the user's shared lock, then locks the default
// conversation's row, then to's (created if new): saves to either wait for
// the move.
func (a adoptTx) Lock(ctx context.Context, from, to memory.Identity) (bool, error) {
	if _, err := a.tx.Exec(ctx, fmt.Sprintf(userLockSQL, "_shared"), to.Tenant, to.User); err != nil {
		return false, fmt.Errorf("lock user: %w", unavailable(err))
	}
	var fromSeq, toSeq int64
	err := a.tx.QueryRow(ctx, `SELECT last_seq FROM conversations WHERE tenant = $1 AND user_id = $2 AND id = $3 FOR UPDATE`,
		from.Tenant, from.User, from.Conversation).Scan(&fromSeq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock conversation: %w", unavailable(err))
	}
	if err := a.tx.QueryRow(ctx, `
		INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
		VALUES ($1, $2, $3, now(), now())
		ON CONFLICT (tenant, user_id, id) DO UPDATE SET last_seq = conversations.last_seq
		RETURNING last_seq`, to.Tenant, to.User, to.Conversation).Scan(&toSeq); err != nil {
		return false, fmt.Errorf("lock conversation: %w", unavailable(err))
	}
	return toSeq == 0, nil // else to has messages of its own
}

// Deleted reads to's deletion under the user's lock Lock took, which
// DeleteConversation takes exclusively.
func (a adoptTx) Deleted(ctx context.Context, to memory.Identity) (time.Time, error) {
	var at time.Time // zero when there is no row
	err := a.tx.QueryRow(ctx, `SELECT deleted_at FROM conversation_tombstones
		WHERE user_digest = memgate_user_tombstone($1, $2) AND digest = memgate_conversation_tombstone($1, $2, $3)`,
		to.Tenant, to.User, to.Conversation).Scan(&at)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, unavailable(err)
	}
	return at, nil
}

func (a adoptTx) Candidates(ctx context.Context, from memory.Identity, candidate string) ([]int64, error) {
	starts, err := collect(ctx, a.tx, pgx.RowTo[int64], `SELECT m.seq FROM conversation_candidates c
		JOIN messages m ON m.tenant = c.tenant AND m.user_id = c.user_id AND m.conversation = c.conversation
			AND m.key = c.first_key AND m.superseded_at IS NULL
		WHERE c.tenant = $1 AND c.user_id = $2 AND c.conversation = $3 AND c.candidate = $4
			AND m.seq > (SELECT COALESCE(MAX(to_seq), 0) FROM summaries
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3)
		ORDER BY m.seq DESC`, from.Tenant, from.User, from.Conversation, candidate)
	if err != nil {
		return nil, fmt.Errorf("find candidates: %w", err)
	}
	return starts, nil
}

func (a adoptTx) Live(ctx context.Context, from memory.Identity, seq int64, n int) ([]memory.Message, error) {
	return liveFrom(ctx, a.tx, from, seq, n)
}

func (a adoptTx) Move(ctx context.Context, from, to memory.Identity, run []memory.Message) error {
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
	b.Queue(adoptFactSourcesSQL, from.Tenant, from.User, from.Conversation, to.Conversation)
	if err := a.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("move messages: %w", unavailable(err))
	}
	return nil
}

// Continued reports whether ex was stored already in its candidate
// conversation or a branch of it recorded with it (contract.Continued).
func (s *Store) Continued(ctx context.Context, ex memory.Exchange) (bool, error) {
	ok, err := contract.Continued(ctx, ex, func(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
		return liveFrom(ctx, s.pool, id, 0, n)
	}, func(ctx context.Context, user memory.Identity, candidate string) ([]string, error) {
		convs, err := collect(ctx, s.pool, pgx.RowTo[string], `SELECT DISTINCT conversation FROM conversation_candidates
			WHERE tenant = $1 AND user_id = $2 AND candidate = $3 AND conversation <> $4 ORDER BY conversation`,
			user.Tenant, user.User, candidate, memory.DefaultConversation)
		return convs, unavailable(err)
	})
	if err != nil {
		return false, fmt.Errorf("postgres: continued: %w", err)
	}
	return ok, nil
}

// liveFrom returns up to n live messages of id from seq on, in seq order.
func liveFrom(ctx context.Context, q querier, id memory.Identity, seq int64, n int) ([]memory.Message, error) {
	return queryMessages(ctx, q, id, liveMessagesSQL+` AND seq >= $4 ORDER BY seq LIMIT $5`, seq, n)
}
