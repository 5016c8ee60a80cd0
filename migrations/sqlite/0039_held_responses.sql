-- held_responses holds the exchange of each background response not
-- answered yet (memory.HeldResponse), until a GET on any gateway process
-- returns it done and claims it (a lease, one claimer at a time), then
-- deletes it once its turn is stored. Its key is a digest of the tenant
-- and the provider's response id (memory.HeldDigest), never the id;
-- tenant_digest (memory.HeldDigest of the tenant alone) bounds a tenant's
-- rows and bytes; owner is the erasure tombstone key of the tenant's user
-- (contract.UserTombstone), conversation its conversation's deletion
-- tombstone key (contract.ConversationTombstone), by which the erasure
-- and the deletion delete its rows; exchange is the exchange, prepared
-- (redacted) as it would be stored, its reply still to come; created_at,
-- expires_at and claimed_until are Unix nanoseconds. A claim leases the
-- row until claimed_until (0: never claimed); the claimer deletes it once
-- its turn is stored, or it is claimed again after the lease.
CREATE TABLE held_responses (
    digest        BLOB    PRIMARY KEY,
    tenant_digest BLOB    NOT NULL,
    owner         BLOB    NOT NULL,
    conversation  BLOB    NOT NULL,
    exchange      BLOB    NOT NULL,
    size          INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    claimed_until INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX held_responses_tenant ON held_responses (tenant_digest, created_at);
CREATE INDEX held_responses_owner ON held_responses (owner);
CREATE INDEX held_responses_conversation ON held_responses (conversation);
CREATE INDEX held_responses_expires ON held_responses (expires_at);
