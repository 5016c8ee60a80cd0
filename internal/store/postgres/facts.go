package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// factLockSQL serializes the fact upserts of one (tenant, user) for the rest
// of the transaction, so the per-key supersession and the per-user cap never
// race. Ids cannot contain '/'.
const factLockSQL = "SELECT pg_advisory_xact_lock(hashtextextended('facts/' || $1 || '/' || $2, 4))"

// factColumns are the columns contract.ScanFact reads, in order.
const factColumns = `id, type, key, value, confidence, mentions, pinned, coalesce(source_conversation, ''),
	created_at, updated_at, superseded_at, expires_at, pin_rule, source_message`

// nullString maps "" to NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// UpsertFact records a statement about a user by the contract
// (storetest.Knowledge; contract.ValidFact), under the user's fact lock
// (capFacts past maxPerUser); f.Key is stored normalised. f.Conversation
// is recorded as a source of the fact (forgetConversationFacts).
func (s *Store) UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error) {
	defer telemetry.Span(&ctx, "postgres.UpsertFact")()
	f, err := contract.ValidFact(f, time.Now())
	if err != nil {
		return memory.Fact{}, fmt.Errorf("postgres: upsert fact: %w", err)
	}
	f.Key = contract.FactKey(f.Key)
	var out memory.Fact
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := guard(ctx, tx, f.Tenant, f.User, f.GuardSince); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, factLockSQL, f.Tenant, f.User); err != nil {
			return fmt.Errorf("lock facts: %w", unavailable(err))
		}
		if err := contract.CheckFactCovers(ctx, tx.QueryRow, coversSQL, f, func(keys []string) any { return keys }); err != nil {
			return unavailable(err)
		}
		if err := contract.CheckLate(ctx, tx.QueryRow, lateSQL, contract.FactSource(&f)); err != nil {
			return unavailable(err)
		}
		old, err := contract.ScanFact(tx.QueryRow(ctx, `SELECT `+factColumns+` FROM facts
			WHERE tenant = $1 AND user_id = $2 AND type = $3 AND norm_key = $4 AND superseded_at IS NULL`,
			f.Tenant, f.User, string(f.Type), f.Key), times{}, f.Tenant, f.User)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("load current fact: %w", unavailable(err))
		}
		// Stated again from the message and by the rule that stated it
		// (enrichment redelivered): nothing changes.
		if again, err := factMentioned(ctx, tx, f); err != nil || again != 0 {
			out = old
			if err == nil && !found {
				out, err = contract.ScanFact(tx.QueryRow(ctx, `SELECT `+factColumns+` FROM facts
					WHERE tenant = $1 AND user_id = $2 AND id = $3`, f.Tenant, f.User, again), times{}, f.Tenant, f.User)
				err = unavailable(err)
			}
			return err
		}
		if found && contract.StatedEarlier(f, old) {
			out = old // a value stated before the current one's latest statement
			return nil
		}
		// Restated (the caller's pin ORed into the row's own, as the UPDATE
		// reads it: an unpin committed since the SELECT above stands), or
		// else the current fact (if any) superseded by a new one that keeps
		// its pin.
		q, args := `UPDATE facts SET
				mentions = mentions + 1, confidence = $4, pinned = pinned OR $5,
				updated_at = greatest(updated_at, $6),
				source_conversation = coalesce($7, source_conversation), expires_at = $8,
				pin_rule = CASE WHEN $9::text <> '' THEN $9::text ELSE pin_rule END,
				source_message = CASE WHEN $10::text <> '' THEN $10::text ELSE source_message END
			WHERE tenant = $1 AND user_id = $2 AND id = $3
			RETURNING `+factColumns, []any{f.Tenant, f.User, old.ID, contract.RestatedConfidence(old.Confidence, f.Confidence),
			f.Pinned, f.UpdatedAt, nullString(f.Conversation), f.ExpiresAt, f.Rule, f.Source}
		if !found || !contract.SameFactValue(old.Value, f.Value) {
			if found {
				if _, err := tx.Exec(ctx, `UPDATE facts SET superseded_at = $4
					WHERE tenant = $1 AND user_id = $2 AND id = $3`,
					f.Tenant, f.User, old.ID, f.UpdatedAt); err != nil {
					return fmt.Errorf("supersede fact: %w", unavailable(err))
				}
				if err := deleteFactItems(ctx, tx, f.Tenant, f.User, []int64{old.ID}); err != nil {
					return err
				}
			}
			q, args = `INSERT INTO facts
					(tenant, user_id, type, key, norm_key, value, confidence, mentions, pinned,
					 source_conversation, created_at, updated_at, expires_at, pin_rule, source_message)
				VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
				RETURNING `+factColumns, []any{f.Tenant, f.User, string(f.Type), f.Key, f.Value, f.Confidence, f.Mentions, f.Pinned || old.Pinned,
				nullString(f.Conversation), f.CreatedAt, f.UpdatedAt, f.ExpiresAt, f.Rule, f.Source}
		}
		if out, err = contract.ScanFact(tx.QueryRow(ctx, q, args...), times{}, f.Tenant, f.User); err != nil {
			return fmt.Errorf("write fact: %w", unavailable(err))
		}
		if err := stateFactSource(ctx, tx, f.Tenant, f.User, f.Conversation, out.ID, f.UpdatedAt); err != nil {
			return err
		}
		if err := mentionFact(ctx, tx, f, out.ID); err != nil {
			return err
		}
		if maxPerUser > 0 {
			return capFacts(ctx, tx, f.Tenant, f.User, out.ID, maxPerUser)
		}
		return nil
	})
	if err != nil {
		return memory.Fact{}, fmt.Errorf("postgres: upsert fact: %w", err)
	}
	return out, nil
}

// capFacts deletes the least valuable unpinned current facts of a user
// (fewest mentions, then least recently updated) until at most max current
// facts remain, sparing keep.
func capFacts(ctx context.Context, tx pgx.Tx, tenant, user string, keep int64, max int) error {
	ids, err := collect(ctx, tx, pgx.RowTo[int64], `
		DELETE FROM facts WHERE tenant = $1 AND user_id = $2 AND id IN (
			SELECT id FROM facts
			WHERE tenant = $1 AND user_id = $2 AND superseded_at IS NULL AND NOT pinned AND id <> $3
			  AND (expires_at IS NULL OR expires_at > now())
			ORDER BY mentions, updated_at, id
			LIMIT greatest(0, (SELECT count(*) FROM facts
				WHERE tenant = $1 AND user_id = $2 AND superseded_at IS NULL
				  AND (expires_at IS NULL OR expires_at > now())) - $4))
		RETURNING id`, tenant, user, keep, max)
	if err != nil {
		return fmt.Errorf("cap facts: %w", err)
	}
	return deleteFactItems(ctx, tx, tenant, user, ids)
}

// deleteFactItems deletes the recall items made from the given facts.
func deleteFactItems(ctx context.Context, tx pgx.Tx, tenant, user string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	refs := make([]string, len(ids))
	for i, id := range ids {
		refs[i] = contract.FactRef(id)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND kind = 'fact' AND source = ANY($3)`,
		tenant, user, refs); err != nil {
		return fmt.Errorf("delete fact items: %w", unavailable(err))
	}
	return nil
}

// Facts lists the user's facts by the contract (storetest.Knowledge).
func (s *Store) Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	defer telemetry.Span(&ctx, "postgres.Facts")()
	facts, err := collect(ctx, s.pool, func(r pgx.CollectableRow) (memory.Fact, error) {
		return contract.ScanFact(r, times{}, tenant, user)
	}, `SELECT `+factColumns+` FROM facts
		WHERE tenant = $1 AND user_id = $2
		  AND ($4 OR (superseded_at IS NULL AND (expires_at IS NULL OR expires_at > $3)))
		ORDER BY updated_at DESC, id DESC`, tenant, user, now, history)
	if err != nil {
		return nil, fmt.Errorf("postgres: facts: %w", err)
	}
	return facts, nil
}

// DeleteFact deletes one fact of the user and its recall items, or returns
// memory.ErrNotFound when the user has no fact with that id.
func (s *Store) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := found(tx.Exec(ctx, `DELETE FROM facts WHERE tenant = $1 AND user_id = $2 AND id = $3`, tenant, user, id)); err != nil {
			return err
		}
		return deleteFactItems(ctx, tx, tenant, user, []int64{id})
	})
	if err != nil {
		return fmt.Errorf("postgres: delete fact %d: %w", id, err)
	}
	return nil
}
