-- conversation_deletions records when a conversation was last deleted
-- (Unix nanoseconds), so that an exchange the gateway received at or
-- before then (memory.Exchange.Received) — a turn in flight during the
-- deletion, which read what was deleted — is dropped when it is saved
-- instead of bringing the conversation back. A user's erasure removes
-- the user's rows (the erasure's own tombstone covers them).
CREATE TABLE conversation_deletions (
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    deleted_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, conversation)
) WITHOUT ROWID;
