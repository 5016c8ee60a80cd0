-- A reply's print (0034) digests its text as a resent history is compared
-- with it (memory.Message.ComparedContent): without the ASCII white space
-- around it and, since this migration, without the reasoning block it
-- opens with — "<think>" up to the first "</think>", and the white space
-- after it — which chat apps show apart and resend without (DeepSeek-R1,
-- QwQ and many local models behind OpenAI-compatible servers put it in
-- the content). memgate_reply_text is that text, the same as Go's
-- (memory's answerText): the tags are ASCII, so counting characters here
-- and bytes there cuts at the same place. Prints stored before this
-- migration stay: a reply opening with a block is then found by the
-- client's text only from the chat's next reply on, as for a print never
-- stored (NULL).
CREATE OR REPLACE FUNCTION memgate_reply_text(b text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN left(t, 7) = '<think>' AND strpos(substr(t, 8), '</think>') > 0
        THEN ltrim(substr(t, strpos(substr(t, 8), '</think>') + 15), E' \t\n\r\x0B\f')
        ELSE t END
    FROM (SELECT btrim(b, E' \t\n\r\x0B\f') AS t) x
$$;

-- The one-statement save of a turn that resends no history, as 0034
-- defined it, with the print of memgate_reply_text.
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
            THEN substring(sha256(convert_to(x.r, 'UTF8') || '\x00'::bytea || convert_to(memgate_reply_text(x.b), 'UTF8')) FROM 1 FOR 16) END
    FROM unnest(p_keys, p_roles, p_contents, p_raws, p_tokens, p_created) WITH ORDINALITY AS x(k, r, b, j, n, a, o);
    UPDATE conversations SET last_seq = last + cardinality(p_keys), updated_at = GREATEST(updated_at, p_at)
    WHERE tenant = p_tenant AND user_id = p_user AND id = p_conv;
    RETURN last + 1;
END;
$$;
