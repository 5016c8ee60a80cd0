-- An assistant message with text carries its print (reply, 16 bytes: the
-- Sum of memory.Message.Print, a digest of its role and text, the text
-- without the ASCII white space around it: memory.Message.ComparedContent), so that a
-- request resending only a window of its history (a client that keeps its
-- last messages, or drops its oldest turns once its model's context
-- fills) and naming no conversation finds the conversation holding the
-- newest reply it resends, by tenant, user and print, among live messages.
-- Messages stored before this migration have none (NULL), as on SQLite
-- (whose SQL has no SHA-256): a chat stored before it is found again from
-- its first reply stored after it. Adding a nullable column without a
-- default rewrites nothing.
ALTER TABLE messages ADD COLUMN reply bytea;

CREATE INDEX messages_reply ON messages (tenant, user_id, reply)
    WHERE superseded_at IS NULL AND reply IS NOT NULL;

-- The one-statement save of a turn that resends no history (0012, 0022,
-- 0026, 0027) writes the print of each reply it inserts, as the store's
-- batched inserts do (contract.ReplyArg): the first 16 bytes of SHA-256
-- of the role, a NUL byte and the text.
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
    INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at, reply)
    SELECT p_tenant, p_user, p_conv, last + x.o, x.k, x.r, x.b, x.j::json, x.n, x.a,
        CASE WHEN x.r = 'assistant' AND x.b <> ''
            THEN substring(sha256(convert_to(x.r, 'UTF8') || '\x00'::bytea || convert_to(btrim(x.b, E' \t\n\r\x0B\f'), 'UTF8')) FROM 1 FOR 16) END
    FROM unnest(p_keys, p_roles, p_contents, p_raws, p_tokens, p_created) WITH ORDINALITY AS x(k, r, b, j, n, a, o);
    UPDATE conversations SET last_seq = last + cardinality(p_keys), updated_at = GREATEST(updated_at, p_at)
    WHERE tenant = p_tenant AND user_id = p_user AND id = p_conv;
    RETURN last + 1;
END;
$$;
