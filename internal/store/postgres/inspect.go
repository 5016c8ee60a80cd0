package postgres

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// The reads below serve the web inspector, not the request path.

// Users lists the users of a tenant that have conversations, most recently
// active first, at most limit of them (limit <= 0: 100). A non-empty match
// keeps the users whose id contains it (case-insensitive).
func (s *Store) Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error) {
	limit = cmp.Or(max(limit, 0), 100)
	us, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (memory.UserActivity, error) {
		var u memory.UserActivity
		return u, row.Scan(&u.User, &u.Conversations, &u.LastActive, &u.Messages)
	}, `SELECT c.user_id, count(*), max(c.updated_at),
		       (SELECT count(*) FROM messages m
		        WHERE m.tenant = c.tenant AND m.user_id = c.user_id AND m.superseded_at IS NULL)
		FROM conversations c
		WHERE c.tenant = $1 AND strpos(lower(c.user_id), $2) > 0
		GROUP BY c.tenant, c.user_id ORDER BY max(c.updated_at) DESC, c.user_id LIMIT $3`,
		tenant, strings.ToLower(match), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list users: %w", err)
	}
	return us, nil
}

// Branches returns the conversation's newest limit superseded messages
// (all for limit <= 0), grouped by the moment they left the live branch,
// oldest first; none for an unknown conversation. The partial index
// messages_superseded (migration 0037) reads them alone.
func (s *Store) Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error) {
	var max any // NULL: no limit
	if limit > 0 {
		max = limit
	}
	var ats []time.Time
	msgs, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (memory.Message, error) {
		var at time.Time
		m, err := contract.ScanMessage(row, times{}, id, &at)
		ats = append(ats, at)
		return m, err
	}, `SELECT `+contract.MessageColumns+`, superseded_at FROM messages
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NOT NULL
		ORDER BY superseded_at DESC, seq DESC LIMIT $4`, id.Tenant, id.User, id.Conversation, max)
	if err != nil {
		return nil, fmt.Errorf("postgres: list superseded messages: %w", err)
	}
	return contract.Branches(msgs, ats), nil
}

// Summaries returns every summary version of the conversation, oldest
// first; none for an unknown conversation.
func (s *Store) Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error) {
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (memory.Summary, error) {
		return contract.ScanSummary(row, times{}, id)
	}, `SELECT `+contract.SummaryColumns+` FROM summaries WHERE tenant = $1 AND user_id = $2 AND conversation = $3
		ORDER BY version`, id.Tenant, id.User, id.Conversation)
	if err != nil {
		return nil, fmt.Errorf("postgres: list summaries: %w", err)
	}
	return out, nil
}

// Footprint counts the rows stored about a user of a tenant, table by table
// (this store keeps no separate exchange records).
func (s *Store) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	var f memory.Footprint
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM conversations WHERE tenant = $1 AND user_id = $2),
		(SELECT count(*) FROM messages WHERE tenant = $1 AND user_id = $2),
		(SELECT count(*) FROM summaries WHERE tenant = $1 AND user_id = $2),
		(SELECT count(*) FROM facts WHERE tenant = $1 AND user_id = $2),
		(SELECT count(*) FROM memory_items WHERE tenant = $1 AND user_id = $2),
		(SELECT count(*) FROM dead_letters WHERE tenant = $1 AND user_id = $2)`, tenant, user).
		Scan(&f.Conversations, &f.Messages, &f.Summaries, &f.Facts, &f.Items, &f.DeadLetters)
	if err != nil {
		return memory.Footprint{}, fmt.Errorf("postgres: count user rows: %w", unavailable(err))
	}
	return f, nil
}

// SetFactPinned pins or unpins one current fact of the user, or returns
// memory.ErrNotFound when the user has no current fact with that id. It
// holds the user's fact lock, as UpsertFact does: a restatement that
// supersedes the fact (the new fact inheriting its pin) comes wholly
// before it, or wholly after it (then the id is no longer current: not
// found), never around it, carrying a pin this call removed.
func (s *Store) SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, factLockSQL, tenant, user); err != nil {
			return unavailable(err)
		}
		return found(tx.Exec(ctx, `UPDATE facts SET pinned = $4
			WHERE tenant = $1 AND user_id = $2 AND id = $3 AND superseded_at IS NULL`, tenant, user, id, pinned))
	})
	if err != nil {
		return fmt.Errorf("postgres: pin fact %d: %w", id, err)
	}
	return nil
}

// AddSavings adds each bucket's counts to the stored ones (a bucket is
// identified by its tenant and Start), in one transaction.
func (s *Store) AddSavings(ctx context.Context, bs []memory.SavingsBucket) error {
	if len(bs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, x := range bs {
		b.Queue(`INSERT INTO savings AS s (tenant, bucket, requests, tokens_original, tokens_sent, degraded, tokens_repeated, tokens_cached)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (tenant, bucket) DO UPDATE SET
				requests = s.requests + EXCLUDED.requests,
				tokens_original = s.tokens_original + EXCLUDED.tokens_original,
				tokens_sent = s.tokens_sent + EXCLUDED.tokens_sent,
				degraded = s.degraded + EXCLUDED.degraded,
				tokens_repeated = s.tokens_repeated + EXCLUDED.tokens_repeated,
				tokens_cached = s.tokens_cached + EXCLUDED.tokens_cached`,
			x.Tenant, x.Start, x.Requests, x.TokensOriginal, x.TokensSent, x.Degraded, x.TokensRepeated, x.TokensCached)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	if err != nil {
		return fmt.Errorf("postgres: add savings: %w", unavailable(err))
	}
	return nil
}

// Savings returns the tenant's stored savings buckets starting at or after
// since, oldest first.
func (s *Store) Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error) {
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (memory.SavingsBucket, error) {
		b := memory.SavingsBucket{Tenant: tenant}
		return b, row.Scan(&b.Start, &b.Requests, &b.TokensOriginal, &b.TokensSent, &b.Degraded, &b.TokensRepeated, &b.TokensCached)
	}, `SELECT bucket, requests, tokens_original, tokens_sent, degraded, tokens_repeated, tokens_cached
		FROM savings WHERE tenant = $1 AND bucket >= $2 ORDER BY bucket`, tenant, since)
	if err != nil {
		return nil, fmt.Errorf("postgres: read savings: %w", err)
	}
	return out, nil
}
