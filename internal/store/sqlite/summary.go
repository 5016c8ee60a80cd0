package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// MessagesAfter reads live messages by the contract (storetest.Knowledge);
// none (and no error) for limit <= 0 or an unknown conversation.
func (s *Store) MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error) {
	if limit <= 0 {
		return []memory.Message{}, nil
	}
	msgs, err := queryMessages(ctx, s.reads, id, liveMessagesSQL+notErasing("messages")+` AND seq > ? ORDER BY seq LIMIT ?`, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("messages after %d: %w", afterSeq, err)
	}
	return msgs, nil
}

// LatestSummary returns the newest summary version of the conversation, or
// memory.ErrNotFound when it has none.
func (s *Store) LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	defer telemetry.Span(&ctx, "sqlite.LatestSummary")()
	sum, err := contract.ScanSummary(s.reads.QueryRowContext(ctx, `SELECT `+contract.SummaryColumns+` FROM summaries
		WHERE tenant = ? AND user_id = ? AND conversation = ?`+notErasing("summaries")+`
		ORDER BY version DESC LIMIT 1`, id.Tenant, id.User, id.Conversation), times{}, id)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Summary{}, fmt.Errorf("summary of %s: %w", id.Conversation, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Summary{}, fmt.Errorf("load summary: %w", err)
	}
	return sum, nil
}

// SaveSummary stores a new summary version in one write transaction, by
// the contract (storetest.Knowledge; contract.ValidSummary).
func (s *Store) SaveSummary(ctx context.Context, sum memory.Summary) error {
	id := memory.Identity{Tenant: sum.Tenant, User: sum.User, Conversation: sum.Conversation}
	sum, keyEvents, preserved, err := contract.ValidSummary(sum, time.Now())
	if err != nil {
		return fmt.Errorf("save summary: %w", err)
	}
	// A summary derived from captured exchanges (GuardSince set) is
	// enrichment's, which no client waits on: it lets clients' writes go first.
	err = s.inWriteAs(ctx, !sum.GuardSince.IsZero(), func(tx *sql.Tx) error {
		if err := guard(ctx, tx, sum.Tenant, sum.User, sum.GuardSince); err != nil {
			return err
		}
		if err := contract.CheckLate(ctx, tx.QueryRowContext, lateSQL, contract.SummarySource(sum)); err != nil {
			return err
		}
		if err := contract.CheckCovers(ctx, tx.QueryRowContext, coversSQL, sum, jsonKeys); err != nil {
			return err
		}
		var latest sql.NullInt64
		var conv int
		err := tx.QueryRowContext(ctx, `SELECT
				(SELECT COUNT(*) FROM conversations WHERE tenant = ?1 AND user_id = ?2 AND id = ?3),
				(SELECT MAX(version) FROM summaries WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3)`,
			id.Tenant, id.User, id.Conversation).Scan(&conv, &latest)
		if err != nil {
			return fmt.Errorf("load latest version: %w", err)
		}
		if conv == 0 {
			return fmt.Errorf("conversation %s: %w", id.Conversation, memory.ErrNotFound)
		}
		if want := latest.Int64 + 1; int64(sum.Version) != want {
			return fmt.Errorf("%w: summary version %d, next is %d", memory.ErrConflict, sum.Version, want)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO summaries (tenant, user_id, conversation, version,
				from_seq, to_seq, content, key_events, preserved, tokens, covered_tokens, created_at, model)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id.Tenant, id.User, id.Conversation, sum.Version, sum.FromSeq, sum.ToSeq, sum.Text,
			string(keyEvents), string(preserved), sum.Tokens, sum.CoveredTokens, nanos(sum.CreatedAt), sum.Summariser)
		if err != nil {
			return fmt.Errorf("insert summary: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save summary: %w", err)
	}
	return nil
}

// coversSQL counts, of the keys ?4 (a JSON array), the live messages of
// conversation ?3 of user (?1, ?2) (contract.CheckCovers).
const coversSQL = `SELECT COUNT(*) FROM messages WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3
	AND superseded_at IS NULL AND key IN (SELECT value FROM json_each(?4))`

// jsonKeys returns keys as a JSON array, a json_each argument.
func jsonKeys(keys []string) any {
	b, _ := json.Marshal(keys) // strings always encode
	return string(b)
}

// unsummarisedSQL names, with ?1..?3 the conversation, ?4 a SupersedeFrom
// (0: none) and ?5 a JSON array of seqs, the summary versions that cover
// a message a save takes off the live branch
// (contract.SavePlan.Unsummarised), but a tool result the save amended.
const unsummarisedSQL = `tenant = ?1 AND user_id = ?2 AND conversation = ?3
	AND ((?4 > 0 AND to_seq >= ?4) OR EXISTS (SELECT 1 FROM json_each(?5) AS s WHERE from_seq <= s.value AND to_seq >= s.value
		AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.tenant = ?1 AND m.user_id = ?2 AND m.conversation = ?3
			AND m.seq = s.value AND m.role IN ('tool', 'function'))))`

// dropSummaries deletes, in the save's transaction tx, the summary
// versions of id that cover a message p takes off the live branch
// (contract.SavePlan.Unsummarised), and their recall items (Ref
// "<conversation>:v<version>"): the latest version left covers only live
// messages. A compaction that read a deleted version, or the messages p
// supersedes, is refused when it saves (SaveSummary).
func dropSummaries(ctx context.Context, tx *sql.Tx, id memory.Identity, p contract.SavePlan) error {
	seqs, from := p.Unsummarised()
	if len(seqs) == 0 && from <= 0 {
		return nil
	}
	if seqs == nil {
		seqs = []int64{}
	}
	js, err := json.Marshal(seqs)
	if err != nil {
		return fmt.Errorf("drop summaries: %w", err)
	}
	args := []any{id.Tenant, id.User, id.Conversation, from, string(js)}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_items
		WHERE tenant = ?1 AND user_id = ?2 AND kind = 'summary' AND source IN (
			SELECT ?3 || ':v' || version FROM summaries WHERE `+unsummarisedSQL+`)`, args...); err != nil {
		return fmt.Errorf("drop items of superseded summaries: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM summaries WHERE `+unsummarisedSQL, args...); err != nil {
		return fmt.Errorf("drop superseded summaries: %w", err)
	}
	return nil
}
