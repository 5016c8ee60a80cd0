package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
)

// A fact's sources are the conversations that stated it (fact_sources,
// migration postgres/0013), "" standing for the management API: deleting a
// conversation deletes the facts no other source stated.

// stateFactSource records that conversation conv ("" for none) stated fact
// id at at.
func stateFactSource(ctx context.Context, tx pgx.Tx, tenant, user, conv string, id int64, at time.Time) error {
	if _, err := tx.Exec(ctx, `INSERT INTO fact_sources (tenant, user_id, conversation, fact_id, stated_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, user_id, conversation, fact_id)
		DO UPDATE SET stated_at = greatest(fact_sources.stated_at, EXCLUDED.stated_at)`,
		tenant, user, conv, id, at); err != nil {
		return fmt.Errorf("record source of fact %d: %w", id, unavailable(err))
	}
	return nil
}

// A fact's mentions are the stored messages that stated it, each with the
// rule that did (fact_mentions, migration postgres/0028): a statement made
// again from its message by its rule — enrichment redelivered — changes
// nothing (storetest.Knowledge).

// factMentioned returns the id of the fact of f's type and (normalised)
// key, current or superseded, that f's message stated by f's rule before,
// or 0 when none did or f names no message.
func factMentioned(ctx context.Context, tx pgx.Tx, f memory.Fact) (int64, error) {
	if f.Source == "" {
		return 0, nil
	}
	var id int64
	err := tx.QueryRow(ctx, `SELECT m.fact_id FROM fact_mentions m
		JOIN facts f ON f.tenant = m.tenant AND f.user_id = m.user_id AND f.id = m.fact_id
		WHERE m.tenant = $1 AND m.user_id = $2 AND m.message = $3 AND m.rule = $4 AND f.type = $5 AND f.norm_key = $6
		LIMIT 1`, f.Tenant, f.User, f.Source, f.Rule, string(f.Type), f.Key).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("find mention of fact: %w", unavailable(err))
	}
	return id, nil
}

// mentionFact records that f's message stated fact id by f's rule (none
// when f names no message).
func mentionFact(ctx context.Context, tx pgx.Tx, f memory.Fact, id int64) error {
	if f.Source == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO fact_mentions (tenant, user_id, message, rule, fact_id)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, f.Tenant, f.User, f.Source, f.Rule, id); err != nil {
		return fmt.Errorf("record mention of fact %d: %w", id, unavailable(err))
	}
	return nil
}

// forgetConversationMentions deletes, in tx, the fact mentions of
// conversation id's messages: once they are gone, a statement of their
// keys (the conversation imported again, its ids derived from its
// content) is a new one, not a redelivery. Call it before the
// conversation's messages are deleted.
func forgetConversationMentions(ctx context.Context, tx pgx.Tx, id memory.Identity) error {
	if _, err := tx.Exec(ctx, `DELETE FROM fact_mentions WHERE tenant = $1 AND user_id = $2 AND message IN (
			SELECT key FROM messages WHERE tenant = $1 AND user_id = $2 AND conversation = $3)`,
		id.Tenant, id.User, id.Conversation); err != nil {
		return fmt.Errorf("forget fact mentions: %w", unavailable(err))
	}
	return nil
}

// forgetConversationSQL removes a conversation as a source of the user's
// facts ($1 tenant, $2 user, $3 conversation) in one statement: the facts
// it alone stated (current or superseded) are deleted — their other
// sources cascade — and their recall items with them; a fact that
// survives and named the conversation as where it was last stated names
// its newest other source instead (NULL for the API), and so do its
// items. It returns the type and key of each deleted current fact.
const forgetConversationSQL = `
WITH gone_sources AS (
	DELETE FROM fact_sources WHERE tenant = $1 AND user_id = $2 AND conversation = $3
	RETURNING fact_id
), orphans AS (
	-- The statement sees fact_sources as it found them: other
	-- conversations' rows only count.
	SELECT g.fact_id FROM gone_sources g
	WHERE NOT EXISTS (SELECT 1 FROM fact_sources s
		WHERE s.tenant = $1 AND s.user_id = $2 AND s.fact_id = g.fact_id AND s.conversation <> $3)
), gone AS (
	DELETE FROM facts f USING orphans o
	WHERE f.tenant = $1 AND f.user_id = $2 AND f.id = o.fact_id
	RETURNING f.id, f.type, f.norm_key, f.superseded_at IS NULL AS current
), gone_items AS (
	DELETE FROM memory_items i USING gone g
	WHERE i.tenant = $1 AND i.user_id = $2 AND i.kind = 'fact' AND i.source = g.id::text
), kept AS (
	UPDATE facts f SET source_conversation = (
		SELECT nullif(s.conversation, '') FROM fact_sources s
		WHERE s.tenant = $1 AND s.user_id = $2 AND s.fact_id = f.id AND s.conversation <> $3
		ORDER BY s.conversation = '', s.stated_at DESC LIMIT 1)
	FROM gone_sources g
	WHERE f.tenant = $1 AND f.user_id = $2 AND f.id = g.fact_id AND f.source_conversation = $3
	  AND g.fact_id NOT IN (SELECT fact_id FROM orphans)
	RETURNING f.id, f.source_conversation
), kept_items AS (
	-- The statement sees facts as it found them: a fact kept names what
	-- kept set, or else what it named.
	UPDATE memory_items i SET conversation = CASE WHEN k.id IS NULL THEN f.source_conversation ELSE k.source_conversation END
	FROM gone_sources g
	JOIN facts f ON f.tenant = $1 AND f.user_id = $2 AND f.id = g.fact_id
	LEFT JOIN kept k ON k.id = f.id
	WHERE i.tenant = $1 AND i.user_id = $2 AND i.kind = 'fact' AND i.source = f.id::text AND i.conversation = $3
	  AND g.fact_id NOT IN (SELECT fact_id FROM orphans)
)
SELECT type, norm_key FROM gone WHERE current`

// reopenFactSQL makes the newest superseded fact of each given type and
// key ($3, $4: parallel arrays) current again, where none is.
const reopenFactSQL = `
UPDATE facts f SET superseded_at = NULL
FROM (
	SELECT DISTINCT ON (p.type, p.norm_key) p.id
	FROM facts p JOIN unnest($3::text[], $4::text[]) AS k(type, norm_key)
		ON p.type = k.type AND p.norm_key = k.norm_key
	WHERE p.tenant = $1 AND p.user_id = $2 AND p.superseded_at IS NOT NULL
	  AND NOT EXISTS (SELECT 1 FROM facts c WHERE c.tenant = $1 AND c.user_id = $2
		AND c.type = p.type AND c.norm_key = p.norm_key AND c.superseded_at IS NULL)
	ORDER BY p.type, p.norm_key, p.superseded_at DESC, p.id DESC
) r
WHERE f.tenant = $1 AND f.user_id = $2 AND f.id = r.id`

// forgetConversationFacts removes conversation id as a source of the user's
// facts, in tx (forgetConversationSQL). When a current fact goes, the
// newest superseded fact of its type and key still stated elsewhere
// becomes current again: the user's facts are what they would be had the
// conversation never been.
func forgetConversationFacts(ctx context.Context, tx pgx.Tx, id memory.Identity) error {
	if _, err := tx.Exec(ctx, factLockSQL, id.Tenant, id.User); err != nil {
		return fmt.Errorf("lock facts: %w", unavailable(err))
	}
	rows, err := tx.Query(ctx, forgetConversationSQL, id.Tenant, id.User, id.Conversation)
	var types, keys []string
	var typ, key string
	if err := eachRow(rows, err, "forget facts of conversation", []any{&typ, &key}, func() {
		types, keys = append(types, typ), append(keys, key)
	}); err != nil || len(types) == 0 {
		return err
	}
	if _, err := tx.Exec(ctx, reopenFactSQL, id.Tenant, id.User, types, keys); err != nil {
		return fmt.Errorf("reopen superseded facts: %w", unavailable(err))
	}
	return nil
}

// retractFactsSQL removes the facts that only the texts at seqs $4 of
// conversation $3 of user ($1, $2), or (when $5 is positive) at seq $5 or
// after it, stated, which an edit just took off the live branch
// (contract.SavePlan.Unsaid, SupersedeFrom), in one statement: a fact
// (current or superseded) goes, with its recall items, when every
// statement of it is a mention (none came from the API or before mentions
// were kept: mentions counts no more than its fact_mentions rows) and no
// mention is of a message still live in a conversation that stated it; a
// current one that goes gives way to the newest superseded fact of its
// type and key, as reopenFactSQL does after a conversation's deletion.
// The statement sees facts as it found them: what gone deletes is left out
// of the reopening by id. The reopening's sort reads all of gone first, so
// the deletions are done before a reopened fact takes the current slot
// (facts_current).
const retractFactsSQL = `
WITH said AS (
	SELECT DISTINCT m.fact_id FROM fact_mentions m
	JOIN messages g ON g.tenant = m.tenant AND g.user_id = m.user_id AND g.key = m.message
	WHERE m.tenant = $1 AND m.user_id = $2 AND g.conversation = $3
	  AND (g.seq = ANY($4::bigint[]) OR ($5::bigint > 0 AND g.seq >= $5::bigint))
), gone AS (
	DELETE FROM facts f USING said x
	WHERE f.tenant = $1 AND f.user_id = $2 AND f.id = x.fact_id
	  AND f.mentions <= (SELECT count(*) FROM fact_mentions c WHERE c.tenant = $1 AND c.user_id = $2 AND c.fact_id = f.id)
	  AND NOT EXISTS (SELECT 1 FROM fact_mentions m
		JOIN fact_sources s ON s.tenant = m.tenant AND s.user_id = m.user_id AND s.fact_id = m.fact_id
		JOIN messages g ON g.tenant = s.tenant AND g.user_id = s.user_id AND g.conversation = s.conversation
			AND g.key = m.message AND g.superseded_at IS NULL
		WHERE m.tenant = $1 AND m.user_id = $2 AND m.fact_id = f.id)
	RETURNING f.id, f.type, f.norm_key, f.superseded_at IS NULL AS current
), gone_items AS (
	DELETE FROM memory_items i USING gone g
	WHERE i.tenant = $1 AND i.user_id = $2 AND i.kind = 'fact' AND i.source = g.id::text
)
UPDATE facts f SET superseded_at = NULL
FROM (
	SELECT DISTINCT ON (p.type, p.norm_key) p.id
	FROM facts p JOIN gone k ON k.current AND p.type = k.type AND p.norm_key = k.norm_key
	WHERE p.tenant = $1 AND p.user_id = $2 AND p.superseded_at IS NOT NULL
	  AND p.id NOT IN (SELECT id FROM gone)
	  AND NOT EXISTS (SELECT 1 FROM facts c WHERE c.tenant = $1 AND c.user_id = $2
		AND c.type = p.type AND c.norm_key = p.norm_key AND c.superseded_at IS NULL
		AND c.id NOT IN (SELECT id FROM gone))
	ORDER BY p.type, p.norm_key, p.superseded_at DESC, p.id DESC
) r
WHERE f.tenant = $1 AND f.user_id = $2 AND f.id = r.id`

// adoptFactSourcesSQL follows an Adopt from conversation $3 to $4 of user
// ($1, $2) in one statement: the facts $3 stated may have come from the
// moved exchanges, so $4 becomes one of their sources. When $3 is gone
// (everything in it moved), it is no longer one: its facts, and their
// recall items, name $4 instead.
const adoptFactSourcesSQL = `
WITH added AS (
	INSERT INTO fact_sources (tenant, user_id, conversation, fact_id, stated_at)
	SELECT tenant, user_id, $4, fact_id, stated_at FROM fact_sources
	WHERE tenant = $1 AND user_id = $2 AND conversation = $3
	ON CONFLICT DO NOTHING
), gone AS (
	SELECT NOT EXISTS (SELECT 1 FROM conversations WHERE tenant = $1 AND user_id = $2 AND id = $3) AS gone
), dropped AS (
	DELETE FROM fact_sources WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND (SELECT gone FROM gone)
), moved AS (
	UPDATE facts SET source_conversation = $4
	WHERE tenant = $1 AND user_id = $2 AND source_conversation = $3 AND (SELECT gone FROM gone)
)
UPDATE memory_items SET conversation = $4
WHERE tenant = $1 AND user_id = $2 AND kind = 'fact' AND conversation = $3 AND (SELECT gone FROM gone)`
