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
    id           bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant       text    NOT NULL,
    user_id      text    NOT NULL,
    conversation text    NOT NULL,
    key          text    NOT NULL,
    chunk        integer NOT NULL,
    byte_offset  integer NOT NULL DEFAULT 0,
    bytes        integer NOT NULL,
    UNIQUE (tenant, user_id, conversation, key),
    FOREIGN KEY (tenant, user_id, conversation, key)
        REFERENCES messages (tenant, user_id, conversation, key) ON DELETE CASCADE ON UPDATE CASCADE
);
