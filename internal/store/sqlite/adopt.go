package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// recordCandidate records, in a save's write transaction tx, the chat
// conversation ex is adopted by (memory.CandidateOf; Adopt), by its first
// message stored in ex's conversation, when res names one: a holder of
// the chat's lock that stalls after the save commits leaves its next
// holder a first turn it finds.
func recordCandidate(ctx context.Context, tx *sql.Tx, ex memory.Exchange, res memory.SaveResult) error {
	candidate := memory.CandidateOf(ex, res)
	if candidate == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO conversation_candidates
		(tenant, user_id, conversation, candidate, first_key, at)
		SELECT tenant, user_id, conversation, ?, key, ? FROM messages
		WHERE tenant = ? AND user_id = ? AND conversation = ? AND key = ?
		ON CONFLICT DO NOTHING`,
		candidate, nanos(time.Now()), ex.Tenant, ex.User, ex.Conversation, memory.Key(ex.ID, 0))
	if err != nil {
		return fmt.Errorf("record candidate: %w", err)
	}
	return nil
}

// Adopt moves a chat's first turns recorded with candidate (to's own id
// when "") out of the user's default conversation into to (contract.Adopt), in one write transaction, with their exchange
// records; whether to holds messages is read without taking the writer.
// Under the chat's lock (fence not zero) it moves only while that hold
// holds it (fenceChats), else fails with memory.ErrLockLost.
func (s *Store) Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error) {
	chat := to
	if candidate != "" {
		chat.Conversation = candidate
	}
	moved, err := contract.Adopt(ctx, to, candidate, prior, received, func(ctx context.Context) (bool, error) {
		return hasMessages(ctx, s.reads, to)
	}, func(fn func(contract.AdoptTx) error) error {
		return s.inWrite(ctx, func(tx *sql.Tx) error {
			if err := s.fenceChats(ctx, tx, fence, chat); err != nil {
				return err
			}
			return fn(adoptTx{tx})
		})
	})
	if err != nil {
		return 0, fmt.Errorf("adopt into %s: %w", to.Conversation, err)
	}
	return moved, nil
}

// hasMessages reports whether conversation id holds a message.
func hasMessages(ctx context.Context, q querier, id memory.Identity) (bool, error) {
	var busy bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?)`,
		id.Tenant, id.User, id.Conversation).Scan(&busy); err != nil {
		return false, fmt.Errorf("check conversation: %w", err)
	}
	return busy, nil
}

// adoptTx is Adopt's write transaction (contract.AdoptTx).
type adoptTx struct{ tx *sql.Tx }

func (a adoptTx) Lock(ctx context.Context, from, to memory.Identity) (bool, error) {
	busy, err := hasMessages(ctx, a.tx, to)
	return !busy, err
}

func (a adoptTx) Deleted(ctx context.Context, to memory.Identity) (time.Time, error) {
	return deletedAt(ctx, a.tx, to)
}

func (a adoptTx) Candidates(ctx context.Context, from memory.Identity, candidate string) ([]int64, error) {
	starts, err := queryAll(ctx, a.tx, scanInt64, `SELECT m.seq FROM conversation_candidates c
		JOIN messages m ON m.tenant = c.tenant AND m.user_id = c.user_id AND m.conversation = c.conversation
			AND m.key = c.first_key AND m.superseded_at IS NULL
		WHERE c.tenant = ?1 AND c.user_id = ?2 AND c.conversation = ?3 AND c.candidate = ?4
			AND m.seq > (SELECT COALESCE(MAX(to_seq), 0) FROM summaries
				WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3)
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
	keys, exchanges := make([]string, len(run)), make([]string, len(run))
	for i, m := range run {
		keys[i], exchanges[i] = m.Key, memory.ExchangeOf(m.Key)
	}
	// ?1 tenant, ?2 user, ?3 from, ?4 to, ?5 the keys in run's order, ?6
	// their exchanges, ?7 now, ?8 len(run), ?9 the time of run's last.
	args := []any{from.Tenant, from.User, from.Conversation, to.Conversation,
		jsonArray(keys), jsonArray(exchanges), nanos(time.Now()), len(run), nanos(run[len(run)-1].CreatedAt)}
	const fromGone = `NOT EXISTS (SELECT 1 FROM conversations WHERE tenant = ?1 AND user_id = ?2 AND id = ?3)`
	for _, q := range []struct{ what, sql string }{
		{"create conversation", `INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
			VALUES (?1, ?2, ?4, ?7, ?7) ON CONFLICT DO NOTHING`},
		{"move messages", `UPDATE messages SET conversation = ?4, seq = k.key + 1 FROM json_each(?5) AS k
			WHERE messages.tenant = ?1 AND messages.user_id = ?2 AND messages.conversation = ?3 AND messages.key = k.value`},
		{"move items", `UPDATE memory_items SET conversation = ?4
			WHERE tenant = ?1 AND user_id = ?2 AND kind = 'message' AND source IN (SELECT value FROM json_each(?5))`},
		{"drop candidates", `DELETE FROM conversation_candidates
			WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND first_key IN (SELECT value FROM json_each(?5))`},
		{"move exchanges", `UPDATE exchanges SET conversation = ?4
			WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND id IN (SELECT value FROM json_each(?6))`},
		{"update conversations", `UPDATE conversations
			SET message_count = message_count + CASE id WHEN ?3 THEN -?8 ELSE ?8 END, updated_at = MAX(updated_at, ?9)
			WHERE tenant = ?1 AND user_id = ?2 AND id IN (?3, ?4)`},
		// A default conversation that held nothing but the chat's first
		// turns goes with them.
		{"drop empty conversation", `DELETE FROM conversations WHERE tenant = ?1 AND user_id = ?2 AND id = ?3
			AND NOT EXISTS (SELECT 1 FROM messages WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3)`},
		// The facts from stated may have come from the moved exchanges, so
		// to becomes one of their sources; when from is gone, it is no
		// longer one: its facts, and their recall items, name to instead.
		{"adopt fact sources", `INSERT INTO fact_sources (tenant, user_id, conversation, fact_id, stated_at)
			SELECT tenant, user_id, ?4, fact_id, stated_at FROM fact_sources
			WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 ON CONFLICT DO NOTHING`},
		{"drop fact sources", `DELETE FROM fact_sources WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND ` + fromGone},
		{"move facts", `UPDATE facts SET conversation = ?4
			WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND ` + fromGone},
		{"move fact items", `UPDATE memory_items SET conversation = ?4
			WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND kind = 'fact' AND ` + fromGone},
	} {
		if _, err := a.tx.ExecContext(ctx, q.sql, args...); err != nil {
			return fmt.Errorf("%s: %w", q.what, err)
		}
	}
	return nil
}

// Continued reports whether ex was stored already in its candidate
// conversation or a branch of it recorded with it (contract.Continued).
func (s *Store) Continued(ctx context.Context, ex memory.Exchange) (bool, error) {
	// Not while an erasure of the user is under way: what it has not
	// deleted yet stored nothing the user sends now. Checked in the reads'
	// snapshot (one read transaction), not after it.
	ok, err := unlessErasing(ctx, s.read, ex.Tenant, ex.User, false, func(q querier) (bool, error) {
		return contract.Continued(ctx, ex, func(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
			return liveFrom(ctx, q, id, 0, n)
		}, func(ctx context.Context, user memory.Identity, candidate string) ([]string, error) {
			return queryAll(ctx, q, scanString, `SELECT DISTINCT conversation FROM conversation_candidates
				WHERE tenant = ? AND user_id = ? AND candidate = ? AND conversation <> ? ORDER BY conversation`,
				user.Tenant, user.User, candidate, memory.DefaultConversation)
		})
	})
	if err != nil {
		return false, fmt.Errorf("continued: %w", err)
	}
	return ok, nil
}

// liveFrom returns up to n live messages of id from seq on, in seq order.
func liveFrom(ctx context.Context, q querier, id memory.Identity, seq int64, n int) ([]memory.Message, error) {
	return queryMessages(ctx, q, id, liveMessagesSQL+` AND seq >= ? ORDER BY seq LIMIT ?`, seq, n)
}
