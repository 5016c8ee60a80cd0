-- memory_item_revisions counts, per user, the changes to their memory items,
-- so a reader holding the user's vectors in memory can tell in one primary
-- key lookup whether they are still current, across processes: added counts
-- inserts (new rows, which take higher ids, so only rows above the highest
-- id held need reading), changed counts deletes and updates of what a vector
-- search reads (the vector, its model and dims, conversation and ref), after
-- which everything is read again. The triggers keep it in step with every
-- writer of the file.
CREATE TABLE memory_item_revisions (
    tenant  TEXT    NOT NULL,
    user_id TEXT    NOT NULL,
    added   INTEGER NOT NULL DEFAULT 0,
    changed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;

CREATE TRIGGER memory_items_rev_insert AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, added) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET added = added + 1;
END;

CREATE TRIGGER memory_items_rev_delete AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
END;

CREATE TRIGGER memory_items_rev_update AFTER UPDATE ON memory_items
    WHEN old.embedding IS NOT new.embedding OR old.model IS NOT new.model OR old.dims IS NOT new.dims
        OR old.conversation IS NOT new.conversation OR old.source IS NOT new.source
        OR old.tenant IS NOT new.tenant OR old.user_id IS NOT new.user_id OR old.id IS NOT new.id
BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
    INSERT INTO memory_item_revisions (tenant, user_id, changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
END;
