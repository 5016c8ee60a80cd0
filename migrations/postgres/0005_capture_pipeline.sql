-- Message keys derive from the exchange id, which memgate mints; they are
-- unique within their conversation. The key used to be unique per tenant,
-- so one user's exchange could be taken for another's duplicate.
ALTER TABLE messages DROP CONSTRAINT messages_tenant_key_key;
ALTER TABLE messages ADD CONSTRAINT messages_conversation_key UNIQUE (tenant, user_id, conversation, key);

-- dead_letters keeps captured exchanges the store refused for good (a
-- constraint they break, text PostgreSQL cannot hold), so they never block
-- the turns behind them and are not lost silently. payload is the captured
-- exchange as JSON (already redacted), kept as bytes so that whatever the
-- text columns refused still fits. Erasing a user deletes theirs.
CREATE TABLE dead_letters (
    tenant       text        NOT NULL,
    user_id      text        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    conversation text        NOT NULL,
    exchange     text        NOT NULL,
    reason       text        NOT NULL,
    payload      bytea       NOT NULL,
    at           timestamptz NOT NULL,
    PRIMARY KEY (tenant, user_id, id)
);
