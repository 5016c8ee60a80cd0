-- messages_changed counts, per user, every update and delete of their
-- messages (a superseded branch, a move into another conversation, an
-- erasure, a deleted conversation, retention), so a reader holding turns
-- around recalled messages in memory can tell in one primary key lookup
-- whether they are still current, across processes. Inserts do not count:
-- a new message takes a seq above every stored one of its conversation, so
-- it never changes a window of turns whose last seq was already stored.
ALTER TABLE memory_item_revisions ADD COLUMN messages_changed INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER messages_rev_update AFTER UPDATE ON messages BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, messages_changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = messages_changed + 1;
    INSERT INTO memory_item_revisions (tenant, user_id, messages_changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = messages_changed + 1;
END;

CREATE TRIGGER messages_rev_delete AFTER DELETE ON messages BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, messages_changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = messages_changed + 1;
END;
