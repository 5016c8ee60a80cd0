-- fact_sources records every conversation that stated a fact (one row per
-- fact and conversation; conversation '' for a fact added without one,
-- through the management API), so deleting a conversation deletes the
-- facts — current or superseded — that no surviving conversation stated,
-- and keeps the ones another conversation (or the API) also stated.
-- stated_at is when that conversation last stated the fact.
CREATE TABLE fact_sources (
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    fact_id      INTEGER NOT NULL,
    stated_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, conversation, fact_id)
) WITHOUT ROWID;

CREATE INDEX fact_sources_by_fact ON fact_sources (tenant, user_id, fact_id);

-- A fact's sources go with it, however it is deleted (a trigger rather
-- than a foreign key, so the lookup uses the tenant-led index).
CREATE TRIGGER fact_sources_follow_fact AFTER DELETE ON facts BEGIN
    DELETE FROM fact_sources WHERE tenant = old.tenant AND user_id = old.user_id AND fact_id = old.id;
END;

-- Facts stored before this migration name only the conversation that
-- stated them last: that one becomes their source.
INSERT INTO fact_sources (tenant, user_id, conversation, fact_id, stated_at)
    SELECT tenant, user_id, COALESCE(conversation, ''), id, updated_at FROM facts;

-- embedding_cache is content-only and emptied by every erasure (see
-- sqlitestore/embedcache.go); erasures before this migration left it
-- alone, so it starts empty.
DELETE FROM embedding_cache;
