package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// A fact's sources are the conversations that stated it (fact_sources,
// migration sqlite/0016), "" standing for the management API: deleting a
// conversation deletes the facts no other source stated.

// stateFactSource records that conversation conv ("" for none) stated fact
// id at at.
func stateFactSource(ctx context.Context, tx *sql.Tx, tenant, user, conv string, id int64, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO fact_sources (tenant, user_id, conversation, fact_id, stated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, user_id, conversation, fact_id) DO UPDATE SET stated_at = MAX(stated_at, excluded.stated_at)`,
		tenant, user, conv, id, nanos(at)); err != nil {
		return fmt.Errorf("record source of fact %d: %w", id, err)
	}
	return nil
}

// A fact's mentions are the stored messages that stated it, each with the
// rule that did (fact_mentions, migration sqlite/0031): a statement made
// again from its message by its rule — enrichment redelivered — changes
// nothing (storetest.Knowledge).

// The mentions' statements, prepared when the Store opens (hotWrites).
const (
	sqlFactMentioned = `SELECT m.fact_id FROM fact_mentions m
		JOIN facts f ON f.id = m.fact_id AND f.tenant = m.tenant AND f.user_id = m.user_id
		WHERE m.tenant = ? AND m.user_id = ? AND m.message = ? AND m.rule = ? AND f.type = ? AND f.norm_key = ?
		LIMIT 1`
	sqlMentionFact = `INSERT INTO fact_mentions (tenant, user_id, message, rule, fact_id)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
)

// factMentioned returns the id of the fact of f's type and key (norm),
// current or superseded, that f's message stated by f's rule before, or 0
// when none did or f names no message.
func factMentioned(ctx context.Context, tx writeTx, f memory.Fact, norm string) (int64, error) {
	if f.Source == "" {
		return 0, nil
	}
	var id int64
	err := tx.QueryRowContext(ctx, sqlFactMentioned, f.Tenant, f.User, f.Source, f.Rule, string(f.Type), norm).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("find mention of fact: %w", err)
	}
	return id, nil
}

// mentionFact records that f's message stated fact id by f's rule (none
// when f names no message).
func mentionFact(ctx context.Context, tx writeTx, f memory.Fact, id int64) error {
	if f.Source == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, sqlMentionFact, f.Tenant, f.User, f.Source, f.Rule, id); err != nil {
		return fmt.Errorf("record mention of fact %d: %w", id, err)
	}
	return nil
}

// forgetConversationMentions deletes, in tx, the fact mentions of
// conversation id's messages: once they are gone, a statement of their
// keys (the conversation imported again, its ids derived from its
// content) is a new one, not a redelivery. Call it before the
// conversation's messages are deleted.
func forgetConversationMentions(ctx context.Context, tx *sql.Tx, id memory.Identity) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM fact_mentions WHERE tenant = ? AND user_id = ? AND message IN (
			SELECT key FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?)`,
		id.Tenant, id.User, id.Tenant, id.User, id.Conversation); err != nil {
		return fmt.Errorf("forget fact mentions: %w", err)
	}
	return nil
}

// forgetConversationFacts removes conversation id as a source of the user's
// facts, in tx: a fact (current or superseded) that no other conversation
// nor the API stated is deleted with its recall items; one that survives
// and named id as where it was last stated names its newest other source
// instead, and so do its recall items. When a current fact goes, the newest
// superseded fact of its type and key still stated elsewhere becomes
// current again: the user's facts are what they would be had the
// conversation never been.
func forgetConversationFacts(ctx context.Context, tx *sql.Tx, id memory.Identity) error {
	ids, err := queryAll(ctx, tx, scanInt64, `DELETE FROM fact_sources
		WHERE tenant = ? AND user_id = ? AND conversation = ? RETURNING fact_id`,
		id.Tenant, id.User, id.Conversation)
	if err != nil {
		return fmt.Errorf("forget fact sources: %w", err)
	}
	var reopen []factKey
	for _, fid := range ids {
		var typ, norm string
		var current bool
		err := tx.QueryRowContext(ctx, `DELETE FROM facts WHERE id = ? AND tenant = ? AND user_id = ?
			AND NOT EXISTS (SELECT 1 FROM fact_sources WHERE tenant = ? AND user_id = ? AND fact_id = ?)
			RETURNING type, norm_key, superseded_at IS NULL`, fid, id.Tenant, id.User, id.Tenant, id.User, fid).Scan(&typ, &norm, &current)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// Stated elsewhere too: it stays, naming a surviving source.
			if _, err := tx.ExecContext(ctx, `UPDATE facts SET conversation = (
					SELECT NULLIF(conversation, '') FROM fact_sources WHERE tenant = ? AND user_id = ? AND fact_id = ?
					ORDER BY conversation = '', stated_at DESC LIMIT 1)
				WHERE id = ? AND conversation = ?`, id.Tenant, id.User, fid, fid, id.Conversation); err != nil {
				return fmt.Errorf("re-source fact %d: %w", fid, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE memory_items SET conversation = (SELECT conversation FROM facts WHERE id = ?)
				WHERE tenant = ? AND user_id = ? AND kind = 'fact' AND source = ? AND conversation = ?`,
				fid, id.Tenant, id.User, contract.FactRef(fid), id.Conversation); err != nil {
				return fmt.Errorf("re-source items of fact %d: %w", fid, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("delete fact %d: %w", fid, err)
		}
		if err := deleteFactItems(ctx, tx, id.Tenant, id.User, fid); err != nil {
			return err
		}
		if current {
			reopen = append(reopen, factKey{typ, norm})
		}
	}
	return reopenFacts(ctx, tx, id.Tenant, id.User, reopen)
}

// factKey is a fact's type and normalised key.
type factKey struct{ typ, norm string }

// reopenFacts makes the newest superseded fact of each of keys current
// again, in tx, where none of its type and key is current: called once
// the current one was deleted.
func reopenFacts(ctx context.Context, tx *sql.Tx, tenant, user string, keys []factKey) error {
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `UPDATE facts SET superseded_at = NULL WHERE id = (
				SELECT id FROM facts WHERE tenant = ? AND user_id = ? AND type = ? AND norm_key = ?
				AND superseded_at IS NOT NULL ORDER BY superseded_at DESC, id DESC LIMIT 1)
			AND NOT EXISTS (SELECT 1 FROM facts WHERE tenant = ? AND user_id = ? AND type = ? AND norm_key = ?
				AND superseded_at IS NULL)`,
			tenant, user, k.typ, k.norm, tenant, user, k.typ, k.norm); err != nil {
			return fmt.Errorf("restore superseded fact: %w", err)
		}
	}
	return nil
}

// retractFacts removes, in tx, the facts that only the texts at seqs of
// conversation id, or (from positive) at seq from or after it, stated,
// which an edit just took off the live branch (contract.SavePlan.Unsaid,
// SupersedeFrom): a fact (current or superseded) goes, with
// its recall items, when every statement of it is a mention (none came
// from the API or before mentions were kept: mentions counts no more
// than its fact_mentions rows) and no mention is of a message still live
// in a conversation that stated it. When a current fact goes, the newest
// superseded fact of its type and key becomes current again, as when a
// conversation is deleted (forgetConversationFacts): the user's facts
// are what they would be had the old text never been said. A fact
// another live message stated too stays.
func retractFacts(ctx context.Context, tx *sql.Tx, id memory.Identity, seqs []int64, from int64) error {
	if len(seqs) == 0 && from <= 0 {
		return nil
	}
	args := []any{id.Tenant, id.User, id.Tenant, id.User, id.Conversation, from}
	in := "" // the seqs beside the range: a list SQLite reads empty too
	if len(seqs) > 0 {
		in = list("?", len(seqs))
	}
	for _, seq := range seqs {
		args = append(args, seq)
	}
	ids, err := queryAll(ctx, tx, scanInt64, `SELECT DISTINCT m.fact_id FROM fact_mentions m
		WHERE m.tenant = ? AND m.user_id = ? AND m.message IN (SELECT key FROM messages
			WHERE tenant = ? AND user_id = ? AND conversation = ?
			AND ((? > 0 AND seq >= ?6) OR seq IN (`+in+`)))`, args...)
	if err != nil {
		return fmt.Errorf("find facts of edited messages: %w", err)
	}
	var reopen []factKey
	for _, fid := range ids {
		var k factKey
		var current bool
		err := tx.QueryRowContext(ctx, `DELETE FROM facts WHERE id = ?3 AND tenant = ?1 AND user_id = ?2
			AND mentions <= (SELECT COUNT(*) FROM fact_mentions WHERE tenant = ?1 AND user_id = ?2 AND fact_id = ?3)
			AND NOT EXISTS (SELECT 1 FROM fact_mentions m
				JOIN fact_sources s ON s.tenant = m.tenant AND s.user_id = m.user_id AND s.fact_id = m.fact_id
				JOIN messages g ON g.tenant = s.tenant AND g.user_id = s.user_id AND g.conversation = s.conversation
					AND g.key = m.message AND g.superseded_at IS NULL
				WHERE m.tenant = ?1 AND m.user_id = ?2 AND m.fact_id = ?3)
			RETURNING type, norm_key, superseded_at IS NULL`, id.Tenant, id.User, fid).Scan(&k.typ, &k.norm, &current)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // stated otherwise too: it stays
		case err != nil:
			return fmt.Errorf("retract fact %d: %w", fid, err)
		}
		if err := deleteFactItems(ctx, tx, id.Tenant, id.User, fid); err != nil {
			return err
		}
		if current {
			reopen = append(reopen, k)
		}
	}
	return reopenFacts(ctx, tx, id.Tenant, id.User, reopen)
}
