-- conversation_candidates records, for an exchange stored in a user's
-- default conversation by a request that named none and resent no earlier
-- turn, the conversation a full-history continuation of it would derive
-- (candidate), by the key of the exchange's first message (first_key): when
-- that continuation arrives, the exchange moves into its conversation.
CREATE TABLE conversation_candidates (
    tenant       text        NOT NULL,
    user_id      text        NOT NULL,
    conversation text        NOT NULL,
    candidate    text        NOT NULL,
    first_key    text        NOT NULL,
    at           timestamptz NOT NULL,
    PRIMARY KEY (tenant, user_id, candidate, first_key),
    FOREIGN KEY (tenant, user_id, conversation)
        REFERENCES conversations (tenant, user_id, id) ON DELETE CASCADE
);
