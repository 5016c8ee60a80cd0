-- memgate schema for PostgreSQL 15 + pgvector.
--
-- Every row belongs to a tenant and every index is led by tenant (the HNSW
-- index is the one exception: pgvector indexes a single expression; queries
-- on it still filter by tenant and user in the same statement).
-- A conversation is identified by (tenant, user_id, id).

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TABLE conversations (
    tenant     text        NOT NULL,
    user_id    text        NOT NULL,
    id         text        NOT NULL,
    -- last_seq is the highest Seq ever given to a message of the
    -- conversation, superseded ones included.
    last_seq   bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, user_id, id)
);

CREATE INDEX conversations_recent ON conversations (tenant, user_id, updated_at DESC);

CREATE TABLE messages (
    tenant        text        NOT NULL,
    user_id       text        NOT NULL,
    conversation  text        NOT NULL,
    seq           bigint      NOT NULL,
    -- key is the idempotency key (exchange id and index): a redelivered
    -- capture hits the unique constraint instead of storing twice.
    key           text        NOT NULL,
    role          text        NOT NULL,
    content       text        NOT NULL,
    -- raw is the OpenAI message object verbatim (json, not jsonb, keeps its
    -- bytes and key order exactly as exchanged); NULL when none was given.
    raw           json,
    tokens        integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    -- superseded_at is set when an edit or regeneration moved the message
    -- off the live branch; such messages are kept but never served.
    superseded_at timestamptz,
    PRIMARY KEY (tenant, user_id, conversation, seq),
    UNIQUE (tenant, key),
    FOREIGN KEY (tenant, user_id, conversation)
        REFERENCES conversations (tenant, user_id, id) ON DELETE CASCADE
);

CREATE INDEX messages_live ON messages (tenant, user_id, conversation, seq DESC)
    WHERE superseded_at IS NULL;

-- erasures records when a user was deleted, so captures of that user queued
-- before the erasure are dropped instead of resurrecting the data.
CREATE TABLE erasures (
    tenant    text        NOT NULL,
    user_id   text        NOT NULL,
    erased_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, user_id)
);

-- summaries are the rolling summaries of a conversation; each version covers
-- the messages from_seq..to_seq (inclusive) and replaces the previous one.
CREATE TABLE summaries (
    tenant       text        NOT NULL,
    user_id      text        NOT NULL,
    conversation text        NOT NULL,
    version      integer     NOT NULL,
    from_seq     bigint      NOT NULL,
    to_seq       bigint      NOT NULL,
    content      text        NOT NULL,
    tokens       integer     NOT NULL DEFAULT 0,
    key_events   jsonb       NOT NULL DEFAULT '[]',
    preserved    jsonb       NOT NULL DEFAULT '{}',
    model        text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, user_id, conversation, version),
    CHECK (from_seq <= to_seq),
    FOREIGN KEY (tenant, user_id, conversation)
        REFERENCES conversations (tenant, user_id, id) ON DELETE CASCADE
);

-- facts are what memgate knows about a user, across conversations. At most
-- one current (not superseded) fact per (type, normalised key); a
-- contradicting value supersedes the old row, which is kept.
CREATE TABLE facts (
    tenant              text        NOT NULL,
    user_id             text        NOT NULL,
    id                  bigint      GENERATED ALWAYS AS IDENTITY,
    type                text        NOT NULL CHECK (type IN ('profile', 'preference', 'goal', 'limit', 'decision', 'relationship', 'event')),
    key                 text        NOT NULL,
    norm_key            text        NOT NULL,
    value               text        NOT NULL,
    confidence          real        NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    mentions            integer     NOT NULL DEFAULT 1,
    pinned              boolean     NOT NULL DEFAULT false,
    source              text        NOT NULL DEFAULT '',
    source_conversation text,
    source_seq          bigint,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    superseded_at       timestamptz,
    expires_at          timestamptz,
    PRIMARY KEY (tenant, user_id, id)
);

CREATE UNIQUE INDEX facts_current ON facts (tenant, user_id, type, norm_key)
    WHERE superseded_at IS NULL;
CREATE INDEX facts_pinned ON facts (tenant, user_id) WHERE pinned AND superseded_at IS NULL;

-- memory_items are the searchable units of recall: chunks of turns,
-- summaries and facts. The embedding's model and dimension are recorded with
-- it; the HNSW index covers the 384-dimension vectors (the local embedder),
-- through an expression cast, because a vector column of mixed dimensions
-- cannot be indexed directly.
CREATE TABLE memory_items (
    tenant       text        NOT NULL,
    user_id      text        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    conversation text,
    kind         text        NOT NULL CHECK (kind IN ('message', 'summary', 'fact')),
    -- source identifies what the item was made from (a message key, a
    -- summary version, a fact id) and chunk its part, so indexing twice
    -- is a no-op.
    source       text        NOT NULL,
    chunk        integer     NOT NULL DEFAULT 0,
    from_seq     bigint,
    to_seq       bigint,
    content      text        NOT NULL,
    embedding    vector,
    dims         integer,
    model        text,
    -- tsv uses the 'simple' configuration: users write in several languages
    -- (English and Portuguese at least), and no stemmer fits them all.
    tsv          tsvector    GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, user_id, id),
    CHECK (embedding IS NULL OR (dims = vector_dims(embedding) AND model IS NOT NULL))
);

CREATE UNIQUE INDEX memory_items_source ON memory_items (tenant, user_id, kind, source, chunk);
CREATE INDEX memory_items_conversation ON memory_items (tenant, user_id, conversation);
CREATE INDEX memory_items_unembedded ON memory_items (tenant, id) WHERE embedding IS NULL;
CREATE INDEX memory_items_tsv ON memory_items USING gin (tenant, user_id, tsv);
CREATE INDEX memory_items_embedding_384 ON memory_items
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE dims = 384;

-- embedding_cache maps (model, dims, hash of the content) to its embedding,
-- so re-indexing the same text costs no embedding call.
CREATE TABLE embedding_cache (
    tenant       text        NOT NULL,
    model        text        NOT NULL,
    dims         integer     NOT NULL,
    content_hash bytea       NOT NULL,
    embedding    vector      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, model, dims, content_hash),
    CHECK (dims = vector_dims(embedding))
);
