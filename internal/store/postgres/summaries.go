package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// MessagesAfter reads live messages by the contract (storetest.Knowledge);
// an unknown conversation has none.
func (s *Store) MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error) {
	if limit <= 0 {
		return nil, nil
	}
	msgs, err := queryMessages(ctx, s.pool, id, liveMessagesSQL+` AND seq > $4 ORDER BY seq LIMIT $5`, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: messages after %d: %w", afterSeq, err)
	}
	return msgs, nil
}

// LatestSummary returns the newest summary version of the conversation, or
// memory.ErrNotFound.
func (s *Store) LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	defer telemetry.Span(&ctx, "postgres.LatestSummary")()
	sum, err := contract.ScanSummary(s.pool.QueryRow(ctx, `SELECT `+contract.SummaryColumns+` FROM summaries
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3
		ORDER BY version DESC LIMIT 1`, id.Tenant, id.User, id.Conversation), times{}, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Summary{}, fmt.Errorf("postgres: latest summary of %s: %w", id.Conversation, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Summary{}, fmt.Errorf("postgres: latest summary of %s: %w", id.Conversation, unavailable(err))
	}
	return sum, nil
}

// SaveSummary stores a new summary version by the contract
// (storetest.Knowledge; contract.ValidSummary); of two concurrent saves of
// one version, the second gets memory.ErrConflict.
func (s *Store) SaveSummary(ctx context.Context, sum memory.Summary) error {
	sum, ke, pr, err := contract.ValidSummary(sum, time.Now())
	if err != nil {
		return fmt.Errorf("postgres: save summary: %w", err)
	}
	// The insert happens only when the stored latest version is Version-1;
	// two concurrent saves of the same version both pass that check, and the
	// primary key lets only one of them commit.
	var tag pgconn.CommandTag
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := guard(ctx, tx, sum.Tenant, sum.User, sum.GuardSince); err != nil {
			return err
		}
		if err := contract.CheckLate(ctx, tx.QueryRow, lateSQL, contract.SummarySource(sum)); err != nil {
			return err
		}
		if sum.Covers != nil {
			// A save that supersedes messages of the conversation holds its
			// row from its upsert to its commit: the check below sees
			// either none of it or all of it, and that save's deletion of
			// the versions covering them sees this one once it commits.
			if _, err := tx.Exec(ctx, `SELECT 1 FROM conversations WHERE tenant = $1 AND user_id = $2 AND id = $3 FOR SHARE`,
				sum.Tenant, sum.User, sum.Conversation); err != nil {
				return fmt.Errorf("lock conversation: %w", err)
			}
		}
		if err := contract.CheckCovers(ctx, tx.QueryRow, coversSQL, sum, func(keys []string) any { return keys }); err != nil {
			return err
		}
		var err error
		tag, err = tx.Exec(ctx, `
		INSERT INTO summaries (tenant, user_id, conversation, version, from_seq, to_seq, content,
		                       key_events, preserved, tokens, covered_tokens, created_at, model)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
		WHERE (SELECT coalesce(max(version), 0) FROM summaries
		       WHERE tenant = $1 AND user_id = $2 AND conversation = $3) = $4 - 1`,
			sum.Tenant, sum.User, sum.Conversation, sum.Version, sum.FromSeq, sum.ToSeq, sum.Text,
			ke, pr, sum.Tokens, sum.CoveredTokens, sum.CreatedAt, sum.Summariser)
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		return fmt.Errorf("postgres: save summary version %d: %w", sum.Version, memory.ErrConflict)
	case errors.As(err, &pgErr) && pgErr.Code == "23503":
		return fmt.Errorf("postgres: save summary of %s: %w", sum.Conversation, memory.ErrNotFound)
	case err != nil:
		return fmt.Errorf("postgres: save summary: %w", unavailable(err))
	case tag.RowsAffected() == 0:
		return fmt.Errorf("postgres: save summary version %d: not the next version: %w", sum.Version, memory.ErrConflict)
	}
	return nil
}

// coversSQL counts, of the keys $4, the live messages of conversation $3
// of user ($1, $2) (contract.CheckCovers).
const coversSQL = `SELECT count(*) FROM messages WHERE tenant = $1 AND user_id = $2 AND conversation = $3
	AND superseded_at IS NULL AND key = ANY($4::text[])`

// dropSummariesSQL deletes the summary versions of conversation $3 of
// user ($1, $2) that cover a message a save takes off the live branch
// (contract.SavePlan.Unsummarised: the seqs $4, and from $5 on when it is
// positive; but a tool result amended), and their recall items (Ref
// "<conversation>:v<version>"), in one statement.
const dropSummariesSQL = `
WITH gone AS (
	DELETE FROM summaries
	WHERE tenant = $1 AND user_id = $2 AND conversation = $3
	  AND (($5::bigint > 0 AND to_seq >= $5::bigint)
	       OR EXISTS (SELECT 1 FROM unnest($4::bigint[]) AS s(seq) WHERE from_seq <= s.seq AND to_seq >= s.seq
	                  AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.tenant = $1 AND m.user_id = $2 AND m.conversation = $3
	                                  AND m.seq = s.seq AND m.role IN ('tool', 'function'))))
	RETURNING version
)
DELETE FROM memory_items
WHERE tenant = $1 AND user_id = $2 AND kind = 'summary' AND source IN (SELECT $3::text || ':v' || version FROM gone)`

// summaries queues, in the save's pipeline, the deletion of the summary
// versions of id that cover a message p takes off the live branch, with
// their recall items (dropSummariesSQL): the latest version left covers
// only live messages. A compaction that read a deleted version, or the
// messages p supersedes, is refused when it saves (SaveSummary).
func (w *batchWriter) summaries(id memory.Identity, p contract.SavePlan) {
	seqs, from := p.Unsummarised()
	if len(seqs) == 0 && from <= 0 {
		return
	}
	if seqs == nil {
		seqs = []int64{}
	}
	w.flush()
	w.p.Queue(dropSummariesSQL, id.Tenant, id.User, id.Conversation, seqs, from)
}
