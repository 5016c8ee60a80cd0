-- conversation_candidates records, for an exchange stored in a user's
-- default conversation by a request that named none and resent no earlier
-- turn, the conversation a full-history continuation of it would derive
-- (candidate), by the key of the exchange's first message (first_key): when
-- that continuation arrives, the exchange moves into its conversation.
CREATE TABLE conversation_candidates (
    tenant       TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    candidate    TEXT    NOT NULL,
    first_key    TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, candidate, first_key)
) WITHOUT ROWID;
