-- fact_sources records every conversation that stated a fact (one row per
-- fact and conversation; conversation '' for a fact added without one,
-- through the management API), so deleting a conversation deletes the
-- facts — current or superseded — that no surviving conversation stated,
-- and keeps the ones another conversation (or the API) also stated.
-- stated_at is when that conversation last stated the fact. A source goes
-- with its fact (ON DELETE CASCADE).
CREATE TABLE fact_sources (
    tenant       text        NOT NULL,
    user_id      text        NOT NULL,
    conversation text        NOT NULL,
    fact_id      bigint      NOT NULL,
    stated_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant, user_id, conversation, fact_id),
    FOREIGN KEY (tenant, user_id, fact_id) REFERENCES facts (tenant, user_id, id) ON DELETE CASCADE
);

CREATE INDEX fact_sources_by_fact ON fact_sources (tenant, user_id, fact_id);

-- Facts stored before this migration name only the conversation that
-- stated them last: that one becomes their source.
INSERT INTO fact_sources (tenant, user_id, conversation, fact_id, stated_at)
    SELECT tenant, user_id, coalesce(source_conversation, ''), id, updated_at FROM facts;

-- embedding_cache was never written (the PostgreSQL mode caches embeddings
-- in Redis, content-only, emptied by every erasure): it goes, so no copy of
-- a tenant's vectors can outlive an erasure in it.
DROP TABLE embedding_cache;
