-- memgate_save_turn stores one exchange that resends no history — the
-- common capture: a turn and its reply appended to their conversation —
-- in one statement, so a save costs one round trip, its commit included
-- (a single statement outside a transaction block commits on its own).
-- It does what pgstore's SaveExchanges does for such an exchange, in the
-- same order: the user's shared advisory lock (an erasure takes it
-- exclusively, so none interleaves), the erasure check (-1: the user was
-- erased at or after p_at, nothing written), the conversation's row
-- locked by its upsert (concurrent saves to it queue there), the
-- duplicate check on the exchange's first key (-2: stored before, nothing
-- written), the messages at the seqs after last_seq, and last_seq moved.
-- It returns the first message's seq.
CREATE FUNCTION memgate_save_turn(
    p_tenant text, p_user text, p_conv text, p_at timestamptz,
    p_keys text[], p_roles text[], p_contents text[], p_raws text[], p_tokens int[], p_created timestamptz[])
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_tenant || '/' || p_user, 3));
    IF EXISTS (SELECT 1 FROM erasures WHERE tenant = p_tenant AND user_id = p_user AND erased_at >= p_at) THEN
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
