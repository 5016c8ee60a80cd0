-- One trigger moves memory_item_revisions.changed on an update of anything
-- a search reads or returns, in place of three (0005's memory_items_rev_update,
-- 0006's memory_items_rev_text and 0012's memory_items_rev_said_at): the
-- old row's user's count, and the new row's when the row moved to another
-- user. The count only has to move (internal/engine/cache keys what it
-- keeps by it), so one step per update is as good as one per column.
DROP TRIGGER memory_items_rev_update;
DROP TRIGGER memory_items_rev_text;
DROP TRIGGER memory_items_rev_said_at;

CREATE TRIGGER memory_items_rev_update AFTER UPDATE ON memory_items
    WHEN old.embedding IS NOT new.embedding OR old.model IS NOT new.model OR old.dims IS NOT new.dims
        OR old.conversation IS NOT new.conversation OR old.source IS NOT new.source
        OR old.tenant IS NOT new.tenant OR old.user_id IS NOT new.user_id OR old.id IS NOT new.id
        OR old.text IS NOT new.text OR old.said_at IS NOT new.said_at
BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, changed) VALUES (old.tenant, old.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
    INSERT INTO memory_item_revisions (tenant, user_id, changed) SELECT new.tenant, new.user_id, 1
        WHERE new.tenant IS NOT old.tenant OR new.user_id IS NOT old.user_id
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
END;
