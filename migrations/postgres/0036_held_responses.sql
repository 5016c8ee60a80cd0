-- held_responses holds the exchange of each background response not
-- answered yet (memory.HeldResponse), until a GET on any gateway process
-- returns it done and claims it (a lease, one claimer at a time), then
-- deletes it once its turn is stored. Its key is a digest of the tenant
-- and the provider's response id (memory.HeldDigest), never the id;
-- tenant_digest (memory.HeldDigest of the tenant alone) bounds a tenant's
-- rows and bytes; owner is the erasure tombstone key of the tenant's user
-- (memgate_user_tombstone), conversation its conversation's deletion
-- tombstone key (memgate_conversation_tombstone), by which the erasure
-- and the deletion delete its rows; exchange is the exchange, prepared
-- (redacted) as it would be stored, its reply still to come. A claim
-- leases the row until claimed_until (NULL: never claimed); the claimer
-- deletes it once its turn is stored, or it is claimed again after the
-- lease.
CREATE TABLE held_responses (
    digest        bytea       PRIMARY KEY,
    tenant_digest bytea       NOT NULL,
    owner         bytea       NOT NULL,
    conversation  bytea       NOT NULL,
    exchange      bytea       NOT NULL,
    size          integer     NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    claimed_until timestamptz
);

CREATE INDEX held_responses_tenant ON held_responses (tenant_digest, created_at);
CREATE INDEX held_responses_owner ON held_responses (owner);
CREATE INDEX held_responses_conversation ON held_responses (conversation);
CREATE INDEX held_responses_expires ON held_responses (expires_at);
