-- The revision counters (0010, 0011, 0021) move in deferred row triggers,
-- once per row. Updating one row n times in a transaction walks the chain
-- of its n versions each time, so a transaction that writes tens of
-- thousands of one user's rows spent minutes of the server on its counter
-- row: the first capture of a 45,000-message history about 40 s, an
-- erasure of as many messages and their items 2.5 min.
--
-- A writer of such a bulk now says, for the statements that write it, that
-- it counts their rows itself (set_config(..., 'on', true), local to its
-- transaction), and moves each counter once, by the rows they wrote, at the
-- end of its transaction, where the triggers would have moved it
-- (internal/store/postgres/counted.go):
--   * memgate.messages_counted: the group commit's inserts of messages
--     (messages_added);
--   * memgate.deletes_counted: an erasure's and a conversation deletion's
--     deletes of messages (messages_changed) and of memory items (changed).
-- The triggers count every other write as before (memgate_append_turn,
-- plain SQL, binaries of before this migration). A constraint trigger's
-- condition is read as each row is written, not when the trigger fires.
DROP TRIGGER messages_rev_insert ON messages;

CREATE CONSTRAINT TRIGGER messages_rev_insert AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (current_setting('memgate.messages_counted', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION messages_revise();

DROP TRIGGER messages_rev_delete ON messages;

CREATE CONSTRAINT TRIGGER messages_rev_delete AFTER DELETE ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (current_setting('memgate.deletes_counted', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION messages_revise();

DROP TRIGGER memory_items_rev_delete ON memory_items;

CREATE CONSTRAINT TRIGGER memory_items_rev_delete AFTER DELETE ON memory_items
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (current_setting('memgate.deletes_counted', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION memory_items_revise();
