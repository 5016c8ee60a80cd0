-- dead_letters keeps captured exchanges the store refused for good (a
-- constraint it breaks, text it cannot hold), so they never block the turns
-- behind them and are not lost silently. payload is the captured exchange
-- as JSON (already redacted). Erasing a user deletes theirs.
CREATE TABLE dead_letters (
    id           INTEGER PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    exchange     TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    at           INTEGER NOT NULL
);

CREATE INDEX dead_letters_by_user ON dead_letters (tenant, user_id);

-- enrich_outbox is the enrichment queue (fact extraction, summaries,
-- indexing) of stored exchanges: same shape and claim rules as outbox,
-- which now only holds captures waiting to be stored.
CREATE TABLE enrich_outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    payload     BLOB    NOT NULL,
    enqueued_at INTEGER NOT NULL,
    claimed_by  TEXT,
    claimed_at  INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0
);
