-- memgate_append_turn is memgate_save_turn (0012) that also answers the
-- user's Revisions.Tail (messages_added + messages_changed, 0021) just
-- before its inserts, which a save reports (memory.SaveResult.TailBefore)
-- so the engine's cache of the conversation's newest turns appends them
-- instead of reading the turns again. The counters move in deferred
-- triggers; SET CONSTRAINTS ALL IMMEDIATE fires them at the end of the
-- statement instead of at its commit, which follows at once: the user's
-- row of memory_item_revisions is then locked, so no other writer moves
-- the count between the read and the commit, and it counts this
-- statement's inserts, nothing else of this transaction's.
-- memgate_save_turn stays for binaries of before this migration sharing
-- the database.
CREATE FUNCTION memgate_append_turn(
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
    SELECT messages_added + messages_changed - cardinality(p_keys) INTO tail_before
    FROM memory_item_revisions WHERE tenant = p_tenant AND user_id = p_user;
END;
$$;
