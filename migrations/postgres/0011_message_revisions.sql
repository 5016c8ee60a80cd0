-- messages_changed counts, per user, every update and delete of their
-- messages (a superseded branch, a move into another conversation, an
-- erasure, a deleted conversation), so a gateway holding the turns around
-- recalled messages in memory (itemindex.Windows) can tell in one primary
-- key lookup whether they are still current, whichever process wrote.
-- Inserts do not count: a new message takes a seq above every stored one
-- of its conversation (under the conversation's row lock), so it never
-- joins a window whose last seq was already stored. Like the item
-- counters (0010), it never goes back.
ALTER TABLE memory_item_revisions ADD COLUMN messages_changed bigint NOT NULL DEFAULT 0;

-- The counter moves when the writer commits, as the item counters do, for
-- the same reason (see 0010): the user's row is then locked only from the
-- commit on, and writers cannot deadlock on it.
CREATE FUNCTION messages_revise() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_item_revisions AS r (tenant, user_id, messages_changed)
    VALUES (OLD.tenant, OLD.user_id, 1)
    ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = r.messages_changed + 1;
    IF TG_OP = 'UPDATE' AND (NEW.tenant, NEW.user_id) IS DISTINCT FROM (OLD.tenant, OLD.user_id) THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, messages_changed)
        VALUES (NEW.tenant, NEW.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = r.messages_changed + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER messages_rev_delete AFTER DELETE ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION messages_revise();
CREATE CONSTRAINT TRIGGER messages_rev_update AFTER UPDATE ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION messages_revise();

-- TRUNCATE fires no delete trigger: every user's turns are read again.
CREATE FUNCTION messages_rev_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_item_revisions SET messages_changed = messages_changed + 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER messages_rev_truncate AFTER TRUNCATE ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION messages_rev_truncate();
