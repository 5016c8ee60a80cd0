-- memgate's embedded schema. Times are INTEGER Unix nanoseconds (UTC).
-- Every index is led by tenant; a conversation is identified by
-- (tenant, user_id, id), so the same conversation id under two users is two
-- conversations.

CREATE TABLE conversations (
    tenant        TEXT    NOT NULL,
    user_id       TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    -- message_count counts live (not superseded) messages.
    message_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, user_id, id)
) WITHOUT ROWID;

CREATE INDEX conversations_by_updated ON conversations (tenant, user_id, updated_at DESC);

-- messages holds every stored message; superseded_at is set when a client
-- edits or regenerates an earlier turn and the message leaves the live branch.
CREATE TABLE messages (
    id            INTEGER PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    user_id       TEXT    NOT NULL,
    conversation  TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    key           TEXT    NOT NULL,
    role          TEXT    NOT NULL,
    content       TEXT    NOT NULL,
    raw           TEXT    NOT NULL,
    tokens        INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    superseded_at INTEGER,
    UNIQUE (tenant, user_id, conversation, seq),
    UNIQUE (tenant, user_id, conversation, key),
    FOREIGN KEY (tenant, user_id, conversation)
        REFERENCES conversations (tenant, user_id, id) ON DELETE CASCADE
);

CREATE INDEX messages_live ON messages (tenant, user_id, conversation, seq)
    WHERE superseded_at IS NULL;

-- exchanges records every stored exchange id, so a redelivered capture is
-- recognised as a duplicate.
CREATE TABLE exchanges (
    tenant            TEXT    NOT NULL,
    user_id           TEXT    NOT NULL,
    conversation      TEXT    NOT NULL,
    id                TEXT    NOT NULL,
    model             TEXT    NOT NULL DEFAULT '',
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    at                INTEGER NOT NULL,
    stored_at         INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, conversation, id),
    FOREIGN KEY (tenant, user_id, conversation)
        REFERENCES conversations (tenant, user_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

-- erasures records when a user was last erased; captures that happened at or
-- before that time are dropped.
CREATE TABLE erasures (
    tenant    TEXT    NOT NULL,
    user_id   TEXT    NOT NULL,
    erased_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;

-- summaries holds the rolling summary versions of a conversation; each covers
-- the messages from_seq..to_seq.
CREATE TABLE summaries (
    id           INTEGER PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    from_seq     INTEGER NOT NULL,
    to_seq       INTEGER NOT NULL,
    content      TEXT    NOT NULL,
    key_events   TEXT    NOT NULL DEFAULT '[]',
    preserved    TEXT    NOT NULL DEFAULT '{}',
    tokens       INTEGER NOT NULL DEFAULT 0,
    model        TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    UNIQUE (tenant, user_id, conversation, version),
    FOREIGN KEY (tenant, user_id, conversation)
        REFERENCES conversations (tenant, user_id, id) ON DELETE CASCADE
);

-- facts holds what is known about a user. A contradicting value supersedes the
-- current fact (superseded_at set), so at most one current fact exists per
-- (tenant, user_id, type, norm_key).
CREATE TABLE facts (
    id            INTEGER PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    user_id       TEXT    NOT NULL,
    conversation  TEXT,
    type          TEXT    NOT NULL CHECK (type IN ('profile', 'preference', 'goal', 'limit', 'decision', 'relationship', 'event')),
    key           TEXT    NOT NULL,
    norm_key      TEXT    NOT NULL,
    value         TEXT    NOT NULL,
    confidence    REAL    NOT NULL DEFAULT 0.5,
    mentions      INTEGER NOT NULL DEFAULT 1,
    pinned        INTEGER NOT NULL DEFAULT 0,
    source        TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    superseded_at INTEGER,
    expires_at    INTEGER
);

CREATE UNIQUE INDEX facts_current ON facts (tenant, user_id, type, norm_key)
    WHERE superseded_at IS NULL;
CREATE INDEX facts_by_user ON facts (tenant, user_id, updated_at DESC);

-- memory_items are the recallable passages (turns, summaries, facts) with
-- their embedding: little-endian float32s, dims of them, made by model.
CREATE TABLE memory_items (
    id           INTEGER PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT,
    kind         TEXT    NOT NULL,
    source       TEXT    NOT NULL,
    chunk        INTEGER NOT NULL DEFAULT 0,
    text         TEXT    NOT NULL,
    embedding    BLOB,
    model        TEXT    NOT NULL DEFAULT '',
    dims         INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    UNIQUE (tenant, user_id, kind, source, chunk)
);

CREATE INDEX memory_items_by_conversation ON memory_items (tenant, user_id, conversation, created_at);
CREATE INDEX memory_items_by_model ON memory_items (tenant, model, dims);

-- memory_items_fts indexes memory item text; rows are kept in step by the
-- triggers below.
CREATE VIRTUAL TABLE memory_items_fts USING fts5(
    text,
    content = 'memory_items',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_items_fts (rowid, text) VALUES (new.id, new.text);
END;

CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_items_fts (memory_items_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF text ON memory_items BEGIN
    INSERT INTO memory_items_fts (memory_items_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memory_items_fts (rowid, text) VALUES (new.id, new.text);
END;

-- embedding_cache keeps embeddings by content hash, per tenant.
CREATE TABLE embedding_cache (
    tenant     TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    dims       INTEGER NOT NULL,
    hash       TEXT    NOT NULL,
    vector     BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, model, dims, hash)
) WITHOUT ROWID;

-- outbox is the durable capture queue of the embedded mode. AUTOINCREMENT
-- keeps ids from being reused, so a late Ack never removes a newer entry.
CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    payload     BLOB    NOT NULL,
    enqueued_at INTEGER NOT NULL,
    claimed_by  TEXT,
    claimed_at  INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0
);
