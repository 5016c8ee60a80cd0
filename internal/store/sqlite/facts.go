package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// factColumns are the columns scanFact reads, in order.
const factColumns = `id, tenant, user_id, COALESCE(conversation, ''), type, key, value, confidence,
	mentions, pinned, created_at, updated_at, superseded_at, expires_at, pin_rule, source_message`

// normKey normalises a fact key: lower-case, runs of whitespace collapsed to
// one space, trimmed. Keys equal after normalisation name the same fact.
func normKey(key string) string {
	return strings.Join(strings.Fields(strings.ToLower(key)), " ")
}

// sameValue reports whether two statements of a fact say the same thing:
// equal up to case and whitespace.
func sameValue(a, b string) bool { return normKey(a) == normKey(b) }

// UpsertFact records a statement about a user in one write transaction, per
// (tenant, user, type, normalised key):
//   - no current fact: f is inserted (Mentions at least 1, Confidence clamped
//     to [0, 1]);
//   - the same value (up to case and whitespace): Mentions + 1, Confidence =
//     min(1, max(old, new) + 0.1), UpdatedAt = f.UpdatedAt, Value, ExpiresAt
//     (when f sets one) and Conversation (when f names one) refreshed;
//   - a different value: the current fact is superseded at f.UpdatedAt (kept
//     as history) and f becomes current.
//
// Pinned is sticky: a key once pinned stays pinned, also across a new value.
// f.Conversation ("" for none) is recorded as a source of the fact, so that
// deleting the conversation deletes the facts only it stated
// (forgetConversationFacts).
// With maxPerUser > 0, when the user then has more current (not superseded)
// facts than maxPerUser, the least valuable unpinned ones other than the
// upserted fact are deleted: expired first, then fewest mentions, then least
// recently updated. The recall items made from a superseded or evicted fact
// (kind "fact", Ref = its id) are deleted with it. Zero CreatedAt/UpdatedAt
// mean now. It returns the current
// fact, and memory.ErrInvalid for a bad id, type, or an empty key or value;
// memory.ErrErased when the fact's erasure guard (GuardSince) refuses the write, or when it
// guards the write and f.Conversation has since been deleted (erasure.go).
func (s *Store) UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error) {
	defer telemetry.Span(&ctx, "sqlite.UpsertFact")()
	norm := normKey(f.Key)
	switch {
	case !memory.ValidID(f.Tenant) || !memory.ValidID(f.User):
		return memory.Fact{}, fmt.Errorf("upsert fact: %w: tenant %q user %q", memory.ErrInvalid, f.Tenant, f.User)
	case !f.Type.Valid():
		return memory.Fact{}, fmt.Errorf("upsert fact: %w: type %q", memory.ErrInvalid, f.Type)
	case norm == "" || strings.TrimSpace(f.Value) == "":
		return memory.Fact{}, fmt.Errorf("upsert fact: %w: empty key or value", memory.ErrInvalid)
	}
	now := time.Now()
	if f.UpdatedAt.IsZero() {
		f.UpdatedAt = now
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = f.UpdatedAt
	}
	f.Confidence = min(1, max(0, f.Confidence))
	f.Mentions = max(1, f.Mentions)
	var out memory.Fact
	// A fact derived from captured exchanges (GuardSince set) is
	// enrichment's, which no client waits on: it lets clients' writes go first.
	err := s.inWriteAs(ctx, !f.GuardSince.IsZero(), func(tx *sql.Tx) error {
		if err := guard(ctx, tx, f.Tenant, f.User, f.GuardSince); err != nil {
			return err
		}
		if gone, err := conversationDeleted(ctx, tx, memory.Identity{Tenant: f.Tenant, User: f.User, Conversation: f.Conversation}, f.GuardSince); err != nil {
			return err
		} else if gone {
			return fmt.Errorf("conversation %s deleted: %w", f.Conversation, memory.ErrErased)
		}
		cur, err := scanFact(tx.QueryRowContext(ctx, `SELECT `+factColumns+` FROM facts
			WHERE tenant = ? AND user_id = ? AND type = ? AND norm_key = ? AND superseded_at IS NULL`,
			f.Tenant, f.User, string(f.Type), norm))
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load current fact: %w", err)
		}
		var id int64
		switch {
		case found && sameValue(cur.Value, f.Value):
			id = cur.ID
			_, err = tx.ExecContext(ctx, `UPDATE facts SET
					value = ?, mentions = mentions + 1, confidence = MIN(1.0, MAX(confidence, ?) + 0.1),
					pinned = pinned OR ?, updated_at = ?,
					conversation = COALESCE(?, conversation), expires_at = COALESCE(?, expires_at),
					pin_rule = CASE WHEN ? != '' THEN ? ELSE pin_rule END,
					source_message = CASE WHEN ? != '' THEN ? ELSE source_message END
				WHERE id = ?`,
				f.Value, f.Confidence, f.Pinned, nanos(f.UpdatedAt), nullString(f.Conversation), nullTime(f.ExpiresAt),
				f.Rule, f.Rule, f.Source, f.Source, id)
			if err != nil {
				return fmt.Errorf("restate fact: %w", err)
			}
		default:
			if found {
				if _, err := tx.ExecContext(ctx, `UPDATE facts SET superseded_at = ? WHERE id = ?`,
					nanos(f.UpdatedAt), cur.ID); err != nil {
					return fmt.Errorf("supersede fact: %w", err)
				}
				if err := deleteFactItems(ctx, tx, f.Tenant, f.User, cur.ID); err != nil {
					return err
				}
				f.Pinned = f.Pinned || cur.Pinned
			}
			err = tx.QueryRowContext(ctx, `INSERT INTO facts (tenant, user_id, conversation, type, key, norm_key,
					value, confidence, mentions, pinned, created_at, updated_at, expires_at, pin_rule, source_message)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
				f.Tenant, f.User, nullString(f.Conversation), string(f.Type), strings.TrimSpace(f.Key), norm,
				f.Value, f.Confidence, f.Mentions, f.Pinned, nanos(f.CreatedAt), nanos(f.UpdatedAt), nullTime(f.ExpiresAt),
				f.Rule, f.Source).
				Scan(&id)
			if err != nil {
				return fmt.Errorf("insert fact: %w", err)
			}
		}
		if err := stateFactSource(ctx, tx, f.Tenant, f.User, f.Conversation, id, f.UpdatedAt); err != nil {
			return err
		}
		if maxPerUser > 0 {
			if err := evictFacts(ctx, tx, f.Tenant, f.User, id, maxPerUser, now); err != nil {
				return err
			}
		}
		out, err = scanFact(tx.QueryRowContext(ctx, `SELECT `+factColumns+` FROM facts WHERE id = ?`, id))
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
	rows, err := tx.QueryContext(ctx, `DELETE FROM facts WHERE id IN (
		SELECT id FROM facts
		WHERE tenant = ? AND user_id = ? AND superseded_at IS NULL AND NOT pinned AND id != ?
		ORDER BY (expires_at IS NOT NULL AND expires_at <= ?) DESC, mentions, updated_at, id
		LIMIT ?) RETURNING id`, tenant, user, keep, nanos(now), n-maxPerUser)
	if err != nil {
		return fmt.Errorf("evict facts: %w", err)
	}
	var evicted []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("evict facts: %w", err)
		}
		evicted = append(evicted, id)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("evict facts: %w", err)
	}
	if err := rows.Err(); err != nil {
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
		tenant, user, strconv.FormatInt(id, 10)); err != nil {
		return fmt.Errorf("delete items of fact %d: %w", id, err)
	}
	return nil
}

// Facts returns the user's current facts (not superseded, not expired at
// now), most recently updated first; with history, superseded and expired
// ones too. An unknown user has none.
//
// Within one request (ctx carrying a memory.Memo) the facts are read once:
// the assembler's pinned facts and recall's ranked facts share the read, and
// the slice, which callers must not modify. Without history the current
// facts come from memory while the user's facts are unchanged (see
// currentFacts, knowcache.go).
func (s *Store) Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	defer telemetry.Span(&ctx, "sqlite.Facts")()
	return memory.Memoized(ctx, factsKey{s, tenant, user, now.UnixNano(), history}, func() ([]memory.Fact, error) {
		if history {
			return s.facts(ctx, tenant, user, now, history)
		}
		return s.currentFacts(ctx, tenant, user, now)
	})
}

// factsKey names one Facts read of a Store in a memory.Memo.
type factsKey struct {
	s            *Store
	tenant, user string
	now          int64
	history      bool
}

// facts reads the user's facts (see Facts).
func (s *Store) facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	where := ``
	args := []any{tenant, user}
	if !history {
		where = ` AND superseded_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`
		args = append(args, nanos(now))
	}
	return s.queryFacts(ctx, where, args...)
}

// queryFacts reads the facts of a user (args: tenant, user, then where's)
// that where (a condition after "AND", or "") selects, most recently
// updated first.
func (s *Store) queryFacts(ctx context.Context, where string, args ...any) ([]memory.Fact, error) {
	rows, err := s.reads.QueryContext(ctx, `SELECT `+factColumns+` FROM facts
		WHERE tenant = ? AND user_id = ?`+where+` ORDER BY updated_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	defer rows.Close()
	fs := []memory.Fact{}
	for rows.Next() {
		f, err := scanFact(rows)
		if err != nil {
			return nil, fmt.Errorf("list facts: %w", err)
		}
		fs = append(fs, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	return fs, nil
}

// DeleteFact deletes one fact of the user, with the recall items made from
// it, or returns memory.ErrNotFound when the user has no fact with that id.
func (s *Store) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM facts WHERE tenant = ? AND user_id = ? AND id = ?`, tenant, user, id)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("fact %d: %w", id, memory.ErrNotFound)
		}
		return deleteFactItems(ctx, tx, tenant, user, id)
	})
	if err != nil {
		return fmt.Errorf("delete fact: %w", err)
	}
	s.factCache.Forget(tenant, user) // stale already: the delete moved the count
	return nil
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scanFact reads one row of factColumns.
func scanFact(r rowScanner) (memory.Fact, error) {
	var f memory.Fact
	var typ string
	var created, updated int64
	var superseded, expires sql.NullInt64
	if err := r.Scan(&f.ID, &f.Tenant, &f.User, &f.Conversation, &typ, &f.Key, &f.Value, &f.Confidence,
		&f.Mentions, &f.Pinned, &created, &updated, &superseded, &expires, &f.Rule, &f.Source); err != nil {
		return memory.Fact{}, err
	}
	f.Type = memory.FactType(typ)
	f.CreatedAt, f.UpdatedAt = fromNanos(created), fromNanos(updated)
	f.SupersededAt, f.ExpiresAt = timePtr(superseded), timePtr(expires)
	return f, nil
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

// timePtr decodes a nullable stored time.
func timePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}
