-- The tombstones hold no id in the clear: a user id is often an email, and
-- an erasure that keeps it keeps who the user was. They are keyed by a
-- SHA-256 digest of the ids instead (contract.UserTombstone,
-- ConversationTombstone, which compute the same bytes in Go): a domain tag,
-- then each id as a netstring (its length in bytes, ':', its bytes, ',').
-- Binaries of before this migration read and write erasures and
-- conversation_deletions, which it drops: upgrade every gateway and worker
-- sharing the database together.
CREATE FUNCTION memgate_netstring(s text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT convert_to(octet_length(convert_to(s, 'UTF8'))::text || ':', 'UTF8') || convert_to(s, 'UTF8') || '\x2c'::bytea
$$;

CREATE FUNCTION memgate_user_tombstone(p_tenant text, p_user text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT sha256(convert_to(E'memgate/tombstone/user/v1\n', 'UTF8') || memgate_netstring(p_tenant) || memgate_netstring(p_user))
$$;

CREATE FUNCTION memgate_conversation_tombstone(p_tenant text, p_user text, p_conv text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT sha256(convert_to(E'memgate/tombstone/conversation/v1\n', 'UTF8')
        || memgate_netstring(p_tenant) || memgate_netstring(p_user) || memgate_netstring(p_conv))
$$;

-- user_tombstones replaces erasures: when the user was last erased, and
-- the user's revision counters at the erasure, whose row of
-- memory_item_revisions (keyed by the id) the erasure deletes. A user's
-- counters read as the sum of both rows, so they never go back, however
-- many items the user has again after a fresh start.
CREATE TABLE user_tombstones (
    digest            bytea       PRIMARY KEY,
    erased_at         timestamptz NOT NULL,
    added             bigint      NOT NULL DEFAULT 0,
    changed           bigint      NOT NULL DEFAULT 0,
    dated             bigint      NOT NULL DEFAULT 0,
    messages_changed  bigint      NOT NULL DEFAULT 0,
    messages_added    bigint      NOT NULL DEFAULT 0,
    facts_changed     bigint      NOT NULL DEFAULT 0,
    summaries_changed bigint      NOT NULL DEFAULT 0
);

-- conversation_tombstones replaces conversation_deletions: when a
-- conversation was last deleted, by the digest of (tenant, user,
-- conversation) after the digest of its user, whose erasure removes the
-- user's rows.
CREATE TABLE conversation_tombstones (
    user_digest bytea       NOT NULL,
    digest      bytea       NOT NULL,
    deleted_at  timestamptz NOT NULL,
    PRIMARY KEY (user_digest, digest)
);

-- The tombstones of earlier builds, digested, with the erased users'
-- counters (deleted under the id).
WITH gone AS (
    DELETE FROM memory_item_revisions r USING erasures e
    WHERE r.tenant = e.tenant AND r.user_id = e.user_id
    RETURNING r.*
)
INSERT INTO user_tombstones (digest, erased_at, added, changed, dated, messages_changed, messages_added,
    facts_changed, summaries_changed)
SELECT memgate_user_tombstone(e.tenant, e.user_id), e.erased_at, coalesce(g.added, 0), coalesce(g.changed, 0),
    coalesce(g.dated, 0), coalesce(g.messages_changed, 0), coalesce(g.messages_added, 0),
    coalesce(g.facts_changed, 0), coalesce(g.summaries_changed, 0)
FROM erasures e LEFT JOIN gone g ON g.tenant = e.tenant AND g.user_id = e.user_id;

INSERT INTO conversation_tombstones (user_digest, digest, deleted_at)
SELECT memgate_user_tombstone(tenant, user_id), memgate_conversation_tombstone(tenant, user_id, conversation), deleted_at
FROM conversation_deletions;

DROP TABLE erasures;
DROP TABLE conversation_deletions;

-- The one-statement save (0012, 0022, 0026) reads the tombstones, and its
-- count before the inserts includes the counts the user's tombstone
-- carries (as the store's other reads of the counters do).
CREATE OR REPLACE FUNCTION memgate_save_turn(
    p_tenant text, p_user text, p_conv text, p_at timestamptz,
    p_keys text[], p_roles text[], p_contents text[], p_raws text[], p_tokens int[], p_created timestamptz[])
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_tenant || '/' || p_user, 3));
    IF EXISTS (SELECT 1 FROM user_tombstones
               WHERE digest = memgate_user_tombstone(p_tenant, p_user) AND erased_at >= p_at) THEN
        RETURN -1;
    END IF;
    INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
    VALUES (p_tenant, p_user, p_conv, p_at, p_at)
    ON CONFLICT (tenant, user_id, id) DO UPDATE SET last_seq = conversations.last_seq
    RETURNING last_seq INTO last;
    IF EXISTS (SELECT 1 FROM messages
               WHERE tenant = p_tenant AND user_id = p_user AND conversation = p_conv AND key = p_keys[1]) THEN
        RETURN -2;
    END IF;
    INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at)
    SELECT p_tenant, p_user, p_conv, last + x.o, x.k, x.r, x.b, x.j::json, x.n, x.a
    FROM unnest(p_keys, p_roles, p_contents, p_raws, p_tokens, p_created) WITH ORDINALITY AS x(k, r, b, j, n, a, o);
    UPDATE conversations SET last_seq = last + cardinality(p_keys), updated_at = GREATEST(updated_at, p_at)
    WHERE tenant = p_tenant AND user_id = p_user AND id = p_conv;
    RETURN last + 1;
END;
$$;

CREATE OR REPLACE FUNCTION memgate_append_turn(
    p_tenant text, p_user text, p_conv text, p_at timestamptz,
    p_keys text[], p_roles text[], p_contents text[], p_raws text[], p_tokens int[], p_created timestamptz[],
    OUT first_seq bigint, OUT tail_before bigint)
LANGUAGE plpgsql AS $$
BEGIN
    first_seq := memgate_save_turn(p_tenant, p_user, p_conv, p_at, p_keys, p_roles, p_contents, p_raws, p_tokens, p_created);
    IF first_seq < 1 THEN
        RETURN; -- erased (-1) or stored before (-2): nothing written
    END IF;
    SET CONSTRAINTS ALL IMMEDIATE;
    SELECT messages_added + messages_changed - cardinality(p_keys)
        + coalesce((SELECT t.messages_added + t.messages_changed FROM user_tombstones t
                    WHERE t.digest = memgate_user_tombstone(p_tenant, p_user)), 0) INTO tail_before
    FROM memory_item_revisions WHERE tenant = p_tenant AND user_id = p_user;
END;
$$;

CREATE OR REPLACE FUNCTION memgate_append_received(
    p_tenant text, p_user text, p_conv text, p_at timestamptz, p_received timestamptz,
    p_keys text[], p_roles text[], p_contents text[], p_raws text[], p_tokens int[], p_created timestamptz[],
    OUT first_seq bigint, OUT tail_before bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_tenant || '/' || p_user, 3));
    IF EXISTS (SELECT 1 FROM conversation_tombstones
               WHERE user_digest = memgate_user_tombstone(p_tenant, p_user)
                 AND digest = memgate_conversation_tombstone(p_tenant, p_user, p_conv) AND deleted_at >= p_received) THEN
        first_seq := -1;
        RETURN;
    END IF;
    SELECT a.first_seq, a.tail_before INTO first_seq, tail_before
    FROM memgate_append_turn(p_tenant, p_user, p_conv, p_at, p_keys, p_roles, p_contents, p_raws, p_tokens, p_created) a;
END;
$$;
