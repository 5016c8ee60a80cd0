-- index_backlog lists the messages an indexing round, bounded in what it
-- adds to the full-text index, indexed in part (a first request resending
-- a long chat, a pasted document): chunk is the first chunk of the message
-- not indexed yet, byte_offset where it starts in the message's
-- indexable text (later rounds cut on from there, not from the start; 0
-- past the first chunk: not known, a round finds it), bytes the length of
-- its text (which bounds what a round reads). Later rounds index the rest and remove the entry; an
-- entry goes with its message (an erasure, a deleted conversation) and
-- follows it out of the default conversation.
CREATE TABLE index_backlog (
    id           INTEGER PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    chunk        INTEGER NOT NULL,
    byte_offset  INTEGER NOT NULL DEFAULT 0,
    bytes        INTEGER NOT NULL,
    UNIQUE (tenant, user_id, conversation, key),
    FOREIGN KEY (tenant, user_id, conversation, key)
        REFERENCES messages (tenant, user_id, conversation, key) ON DELETE CASCADE ON UPDATE CASCADE
);
