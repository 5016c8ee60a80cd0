-- conversation_deletions records when a conversation was last deleted, so
-- that an exchange the gateway received at or before then
-- (memory.Exchange.Received) — a turn in flight during the deletion,
-- which read what was deleted — is dropped when it is saved instead of
-- bringing the conversation back. A user's erasure removes the user's
-- rows (the erasure's own tombstone covers them).
CREATE TABLE conversation_deletions (
    tenant       text        NOT NULL,
    user_id      text        NOT NULL,
    conversation text        NOT NULL,
    deleted_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant, user_id, conversation)
);

-- memgate_append_received is memgate_append_turn (0022) that first takes
-- the user's shared advisory lock, as memgate_save_turn does (a
-- conversation's deletion takes it exclusively), and answers -1 (nothing
-- written) when the conversation was deleted at or after p_received.
CREATE FUNCTION memgate_append_received(
    p_tenant text, p_user text, p_conv text, p_at timestamptz, p_received timestamptz,
    p_keys text[], p_roles text[], p_contents text[], p_raws text[], p_tokens int[], p_created timestamptz[],
    OUT first_seq bigint, OUT tail_before bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_tenant || '/' || p_user, 3));
    IF EXISTS (SELECT 1 FROM conversation_deletions
               WHERE tenant = p_tenant AND user_id = p_user AND conversation = p_conv AND deleted_at >= p_received) THEN
        first_seq := -1;
        RETURN;
    END IF;
    SELECT a.first_seq, a.tail_before INTO first_seq, tail_before
    FROM memgate_append_turn(p_tenant, p_user, p_conv, p_at, p_keys, p_roles, p_contents, p_raws, p_tokens, p_created) a;
END;
$$;
