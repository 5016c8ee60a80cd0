-- facts_changed counts, per user, every insert, update and delete of their
-- facts, and summaries_changed every insert, update and delete of their
-- summaries, so a reader holding a user's current facts or a
-- conversation's latest summary in memory can tell in one primary key
-- lookup, across processes, whether they are still current. Neither ever
-- goes back (an erasure moves both and keeps the user's row), so equal
-- counts name the same facts (summaries) of the user.
ALTER TABLE memory_item_revisions ADD COLUMN facts_changed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_item_revisions ADD COLUMN summaries_changed INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER facts_rev_insert AFTER INSERT ON facts BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, facts_changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET facts_changed = facts_changed + 1;
END;

CREATE TRIGGER facts_rev_update AFTER UPDATE ON facts BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, facts_changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET facts_changed = facts_changed + 1;
    INSERT INTO memory_item_revisions (tenant, user_id, facts_changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET facts_changed = facts_changed + 1;
END;

CREATE TRIGGER facts_rev_delete AFTER DELETE ON facts BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, facts_changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET facts_changed = facts_changed + 1;
END;

CREATE TRIGGER summaries_rev_insert AFTER INSERT ON summaries BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, summaries_changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET summaries_changed = summaries_changed + 1;
END;

CREATE TRIGGER summaries_rev_update AFTER UPDATE ON summaries BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, summaries_changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET summaries_changed = summaries_changed + 1;
    INSERT INTO memory_item_revisions (tenant, user_id, summaries_changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET summaries_changed = summaries_changed + 1;
END;

CREATE TRIGGER summaries_rev_delete AFTER DELETE ON summaries BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, summaries_changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET summaries_changed = summaries_changed + 1;
END;
