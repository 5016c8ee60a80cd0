-- provider_states records whose each provider state memgate relayed is
-- (memory.StateBinding: a stored response, a conversation of the
-- Conversations API), when every tenant reaches the provider with one
-- shared key: the state's owner alone may name it again. Its key is a
-- digest of the state's kind and id (contract.StateDigest), never the id;
-- owner is the erasure tombstone key of the tenant's user
-- (memgate_user_tombstone), by which the user's erasure deletes its rows;
-- expires_at is when the binding lapses.
CREATE TABLE provider_states (
    digest     bytea       PRIMARY KEY,
    owner      bytea       NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX provider_states_owner ON provider_states (owner);
CREATE INDEX provider_states_expires ON provider_states (expires_at);
