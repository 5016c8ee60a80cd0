-- A save that stores a long history at once (a client resending tens of
-- thousands of messages at its first capture) inserts them in one
-- statement, and messages_rev_insert (0021) then moved the user's
-- messages_added once per row at the commit. Updating one row n times in a
-- transaction walks the chain of its n versions each time: 45,000 messages
-- cost about 40 s of the server, a minute under load. A writer that counts
-- its own inserts now says so for its transaction
-- (set_config('memgate.messages_counted', 'on', true)) and moves each
-- user's count once, by the number of rows it inserted, at the point its
-- deferred triggers fire; the trigger still counts every other insert
-- (memgate_append_turn, plain SQL, binaries of before this migration).
-- The condition is read as each row is inserted, not when the deferred
-- trigger fires.
DROP TRIGGER messages_rev_insert ON messages;

CREATE CONSTRAINT TRIGGER messages_rev_insert AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (current_setting('memgate.messages_counted', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION messages_revise();
