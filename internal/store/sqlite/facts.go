package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// factColumns are the columns contract.ScanFact reads, in order.
const factColumns = `id, type, key, value, confidence, mentions, pinned, COALESCE(conversation, ''),
	created_at, updated_at, superseded_at, expires_at, pin_rule, source_message`

// UpsertFact records a statement about a user in one write transaction by
// the contract (storetest.Knowledge; contract.ValidFact): past maxPerUser
// the expired facts go first (evictFacts). f.Conversation is recorded as a
// source of the fact (forgetConversationFacts).
func (s *Store) UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error) {
	defer telemetry.Span(&ctx, "sqlite.UpsertFact")()
	now := time.Now()
	f, err := contract.ValidFact(f, now)
	if err != nil {
		return memory.Fact{}, fmt.Errorf("upsert fact: %w", err)
	}
	norm := contract.FactKey(f.Key)
	var out memory.Fact
	// A fact derived from captured exchanges (GuardSince set) is
	// enrichment's, which no client waits on: it lets clients' writes go first.
	err = s.inWriteAs(ctx, !f.GuardSince.IsZero(), func(tx *sql.Tx) error {
		if err := guard(ctx, tx, f.Tenant, f.User, f.GuardSince); err != nil {
			return err
		}
		if err := contract.CheckFactCovers(ctx, tx.QueryRowContext, coversSQL, f, jsonKeys); err != nil {
			return err
		}
		if err := contract.CheckLate(ctx, tx.QueryRowContext, lateSQL, contract.FactSource(&f)); err != nil {
			return err
		}
		cur, err := contract.ScanFact(tx.QueryRowContext(ctx, `SELECT `+factColumns+` FROM facts
			WHERE tenant = ? AND user_id = ? AND type = ? AND norm_key = ? AND superseded_at IS NULL`,
			f.Tenant, f.User, string(f.Type), norm), times{}, f.Tenant, f.User)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load current fact: %w", err)
		}
		// Stated again from the message and by the rule that stated it
		// (enrichment redelivered): nothing changes.
		if again, err := factMentioned(ctx, writeTx{tx, s.writes}, f, norm); err != nil || again != 0 {
			out = cur
			if err == nil && !found {
				out, err = contract.ScanFact(tx.QueryRowContext(ctx, `SELECT `+factColumns+` FROM facts WHERE id = ?`, again),
					times{}, f.Tenant, f.User)
			}
			return err
		}
		// Restated, or else the current fact (if any) superseded by a new
		// one; either keeps a pin. A value stated before the current one
		// was last stated (contract.StatedEarlier) leaves it current.
		if found && contract.StatedEarlier(f, cur) {
			out = cur
			return nil
		}
		f.Pinned = f.Pinned || cur.Pinned
		id := cur.ID
		if found && contract.SameFactValue(cur.Value, f.Value) {
			_, err = tx.ExecContext(ctx, `UPDATE facts SET
					value = ?, mentions = mentions + 1, confidence = MIN(1.0, MAX(confidence, ?) + 0.1),
					pinned = pinned OR ?, updated_at = MAX(updated_at, ?),
					conversation = COALESCE(?, conversation), expires_at = COALESCE(?, expires_at),
					pin_rule = CASE WHEN ? != '' THEN ? ELSE pin_rule END,
					source_message = CASE WHEN ? != '' THEN ? ELSE source_message END
				WHERE id = ?`,
				f.Value, f.Confidence, f.Pinned, nanos(f.UpdatedAt), nullString(f.Conversation), nullTime(f.ExpiresAt),
				f.Rule, f.Rule, f.Source, f.Source, id)
		} else {
			if found {
				if _, err := tx.ExecContext(ctx, `UPDATE facts SET superseded_at = ? WHERE id = ?`,
					nanos(f.UpdatedAt), cur.ID); err != nil {
					return fmt.Errorf("supersede fact: %w", err)
				}
				if err := deleteFactItems(ctx, tx, f.Tenant, f.User, cur.ID); err != nil {
					return err
				}
			}
			err = tx.QueryRowContext(ctx, `INSERT INTO facts (tenant, user_id, conversation, type, key, norm_key,
					value, confidence, mentions, pinned, created_at, updated_at, expires_at, pin_rule, source_message)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
				f.Tenant, f.User, nullString(f.Conversation), string(f.Type), strings.TrimSpace(f.Key), norm,
				f.Value, f.Confidence, f.Mentions, f.Pinned, nanos(f.CreatedAt), nanos(f.UpdatedAt), nullTime(f.ExpiresAt),
				f.Rule, f.Source).Scan(&id)
		}
		if err != nil {
			return fmt.Errorf("write fact: %w", err)
		}
		if err := stateFactSource(ctx, tx, f.Tenant, f.User, f.Conversation, id, f.UpdatedAt); err != nil {
			return err
		}
		if err := mentionFact(ctx, writeTx{tx, s.writes}, f, id); err != nil {
			return err
		}
		if maxPerUser > 0 {
			if err := evictFacts(ctx, tx, f.Tenant, f.User, id, maxPerUser, now); err != nil {
				return err
			}
		}
		out, err = contract.ScanFact(tx.QueryRowContext(ctx, `SELECT `+factColumns+` FROM facts WHERE id = ?`, id),
			times{}, f.Tenant, f.User)
		if err != nil {
			return fmt.Errorf("load upserted fact: %w", err)
		}
		return nil
	})
	if err != nil {
		return memory.Fact{}, fmt.Errorf("upsert fact: %w", err)
	}
	return out, nil
}

// evictFacts deletes the user's least valuable unpinned current facts, never
// keep, until at most maxPerUser current facts remain.
func evictFacts(ctx context.Context, tx *sql.Tx, tenant, user string, keep int64, maxPerUser int, now time.Time) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM facts
		WHERE tenant = ? AND user_id = ? AND superseded_at IS NULL`, tenant, user).Scan(&n); err != nil {
		return fmt.Errorf("count facts: %w", err)
	}
	if n <= maxPerUser {
		return nil
	}
	evicted, err := queryAll(ctx, tx, scanInt64, `DELETE FROM facts WHERE id IN (
		SELECT id FROM facts
		WHERE tenant = ? AND user_id = ? AND superseded_at IS NULL AND NOT pinned AND id != ?
		ORDER BY (expires_at IS NOT NULL AND expires_at <= ?) DESC, mentions, updated_at, id
		LIMIT ?) RETURNING id`, tenant, user, keep, nanos(now), n-maxPerUser)
	if err != nil {
		return fmt.Errorf("evict facts: %w", err)
	}
	for _, id := range evicted {
		if err := deleteFactItems(ctx, tx, tenant, user, id); err != nil {
			return err
		}
	}
	return nil
}

// deleteFactItems removes the recall items made from a fact (kind "fact",
// Ref = its id), so a fact that is no longer current is never recalled.
func deleteFactItems(ctx context.Context, tx *sql.Tx, tenant, user string, id int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_items
		WHERE tenant = ? AND user_id = ? AND kind = 'fact' AND source = ?`,
		tenant, user, contract.FactRef(id)); err != nil {
		return fmt.Errorf("delete items of fact %d: %w", id, err)
	}
	return nil
}

// Facts lists the user's facts by the contract (storetest.Knowledge); an
// unknown user has none.
func (s *Store) Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	defer telemetry.Span(&ctx, "sqlite.Facts")()
	where := ``
	args := []any{tenant, user}
	if !history {
		where = ` AND superseded_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`
		args = append(args, nanos(now))
	}
	fs, err := queryAll(ctx, s.reads, func(r rowScanner) (memory.Fact, error) {
		return contract.ScanFact(r, times{}, tenant, user)
	}, `SELECT `+factColumns+` FROM facts
		WHERE tenant = ? AND user_id = ?`+where+notErasing("facts")+` ORDER BY updated_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	return fs, nil
}

// DeleteFact deletes one fact of the user, with the recall items made from
// it, or returns memory.ErrNotFound when the user has no fact with that id.
func (s *Store) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM facts WHERE tenant = ? AND user_id = ? AND id = ?`, tenant, user, id)
		if err := found(r, err, fmt.Sprint("fact ", id)); err != nil {
			return err
		}
		return deleteFactItems(ctx, tx, tenant, user, id)
	})
	if err != nil {
		return fmt.Errorf("delete fact: %w", err)
	}
	return nil
}

// scanInt64 reads a row of one integer.
func scanInt64(r rowScanner) (int64, error) {
	var n int64
	err := r.Scan(&n)
	return n, err
}

// scanString reads a row of one text.
func scanString(r rowScanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

// nullString stores "" as NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// nullTime stores a nil time as NULL.
func nullTime(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: nanos(*t), Valid: true}
}
