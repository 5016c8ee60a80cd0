-- messages_added counts, per user, every insert of their messages, so a
-- reader holding a conversation's newest turns in memory can tell in one
-- primary key lookup, across processes, whether they are still current:
-- any change of a user's messages moves messages_added (an insert) or
-- messages_changed (an update or delete, migration 0013), and neither ever
-- goes back, so their sum names one state of the user's messages.
ALTER TABLE memory_item_revisions ADD COLUMN messages_added INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER messages_rev_insert AFTER INSERT ON messages BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, messages_added) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_added = messages_added + 1;
END;
