package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// The reads below serve the web inspector, not the request path: they use
// the read pool directly rather than the prepared-statement cache.

// Users lists the users of a tenant that have conversations, most recently
// active first, at most limit of them (limit <= 0: 100). A non-empty match
// keeps the users whose id contains it (case-insensitive).
func (s *Store) Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error) {
	limit = cmp.Or(max(limit, 0), 100)
	us, err := queryAll(ctx, s.read, func(r rowScanner) (memory.UserActivity, error) {
		var u memory.UserActivity
		return u, r.Scan(&u.User, &u.Conversations, &u.Messages, (*nanoTime)(&u.LastActive))
	}, `SELECT user_id, COUNT(*), COALESCE(SUM(message_count), 0), MAX(updated_at)
		FROM conversations c WHERE tenant = ? AND instr(lower(user_id), ?) > 0
			AND NOT EXISTS (SELECT 1 FROM user_erasures e WHERE e.tenant = c.tenant AND e.user_id = c.user_id)
		GROUP BY user_id ORDER BY MAX(updated_at) DESC, user_id LIMIT ?`, tenant, strings.ToLower(match), limit)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

// Branches returns the conversation's newest limit superseded messages
// (all for limit <= 0), grouped by the moment they left the live branch,
// oldest first; none for an unknown conversation. The partial index
// messages_superseded (migration 0040) reads them alone.
func (s *Store) Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error) {
	if limit <= 0 {
		limit = -1 // SQLite's "no limit"
	}
	var ats []time.Time
	msgs, err := queryAll(ctx, s.read, func(r rowScanner) (memory.Message, error) {
		var at time.Time
		m, err := contract.ScanMessage(r, times{}, id, times{}.Dest(&at))
		ats = append(ats, at)
		return m, err
	}, `SELECT `+contract.MessageColumns+`, superseded_at FROM messages
		WHERE tenant = ? AND user_id = ? AND conversation = ? AND superseded_at IS NOT NULL`+notErasing("messages")+`
		ORDER BY superseded_at DESC, seq DESC LIMIT ?`, id.Tenant, id.User, id.Conversation, limit)
	s.readHook()
	if err != nil {
		return nil, fmt.Errorf("list superseded messages: %w", err)
	}
	return contract.Branches(msgs, ats), nil
}

// Summaries returns every summary version of the conversation, oldest
// first; none for an unknown conversation.
func (s *Store) Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error) {
	out, err := queryAll(ctx, s.read, func(r rowScanner) (memory.Summary, error) {
		return contract.ScanSummary(r, times{}, id)
	}, `SELECT `+contract.SummaryColumns+` FROM summaries WHERE tenant = ? AND user_id = ? AND conversation = ?`+
		notErasing("summaries")+` ORDER BY version`, id.Tenant, id.User, id.Conversation)
	s.readHook()
	if err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	return out, nil
}

// Footprint counts the rows stored about a user of a tenant, table by table:
// none while an erasure of the user is under way (checked in the counts'
// statement, so in their snapshot).
func (s *Store) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	var f memory.Footprint
	err := s.read.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM conversations WHERE tenant = ?1 AND user_id = ?2),
		(SELECT COUNT(*) FROM messages WHERE tenant = ?1 AND user_id = ?2),
		(SELECT COUNT(*) FROM summaries WHERE tenant = ?1 AND user_id = ?2),
		(SELECT COUNT(*) FROM facts WHERE tenant = ?1 AND user_id = ?2),
		(SELECT COUNT(*) FROM memory_items WHERE tenant = ?1 AND user_id = ?2),
		(SELECT COUNT(*) FROM exchanges WHERE tenant = ?1 AND user_id = ?2),
		(SELECT COUNT(*) FROM dead_letters WHERE tenant = ?1 AND user_id = ?2)
		WHERE NOT EXISTS (SELECT 1 FROM user_erasures WHERE tenant = ?1 AND user_id = ?2)`, tenant, user).
		Scan(&f.Conversations, &f.Messages, &f.Summaries, &f.Facts, &f.Items, &f.Exchanges, &f.DeadLetters)
	s.readHook()
	if errors.Is(err, sql.ErrNoRows) { // an erasure under way
		return memory.Footprint{}, nil
	}
	if err != nil {
		return memory.Footprint{}, fmt.Errorf("count user rows: %w", err)
	}
	return f, nil
}

// SetFactPinned pins or unpins one current fact of the user, or returns
// memory.ErrNotFound when the user has no current fact with that id.
func (s *Store) SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE facts SET pinned = ? WHERE tenant = ? AND user_id = ? AND id = ?
			AND superseded_at IS NULL`, pinned, tenant, user, id)
		return found(r, err, fmt.Sprint("fact ", id))
	})
	if err != nil {
		return fmt.Errorf("pin fact: %w", err)
	}
	return nil
}

// AddSavings adds each bucket's counts to the stored ones (a bucket is
// identified by its tenant and Start), in one write transaction.
func (s *Store) AddSavings(ctx context.Context, bs []memory.SavingsBucket) error {
	if len(bs) == 0 {
		return nil
	}
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		for _, b := range bs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO savings (tenant, bucket, requests, tokens_original, tokens_sent, degraded, tokens_repeated, tokens_cached)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (tenant, bucket) DO UPDATE SET
					requests = requests + excluded.requests,
					tokens_original = tokens_original + excluded.tokens_original,
					tokens_sent = tokens_sent + excluded.tokens_sent,
					degraded = degraded + excluded.degraded,
					tokens_repeated = tokens_repeated + excluded.tokens_repeated,
					tokens_cached = tokens_cached + excluded.tokens_cached`,
				b.Tenant, nanos(b.Start), b.Requests, b.TokensOriginal, b.TokensSent, b.Degraded, b.TokensRepeated, b.TokensCached); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add savings: %w", err)
	}
	return nil
}

// Savings returns the tenant's stored savings buckets starting at or after
// since, oldest first.
func (s *Store) Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error) {
	out, err := queryAll(ctx, s.read, func(r rowScanner) (memory.SavingsBucket, error) {
		b := memory.SavingsBucket{Tenant: tenant}
		return b, r.Scan((*nanoTime)(&b.Start), &b.Requests, &b.TokensOriginal, &b.TokensSent, &b.Degraded, &b.TokensRepeated, &b.TokensCached)
	}, `SELECT bucket, requests, tokens_original, tokens_sent, degraded, tokens_repeated, tokens_cached
		FROM savings WHERE tenant = ? AND bucket >= ? ORDER BY bucket`, tenant, nanos(since))
	if err != nil {
		return nil, fmt.Errorf("read savings: %w", err)
	}
	return out, nil
}
