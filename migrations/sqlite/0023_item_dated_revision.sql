-- memory_item_revisions.dated counts the updates of an item that change
-- its time said alone (a fact stated again, turn after turn): the items a
-- search returns are kept under changed + dated, while the vectors and the
-- full-text index, which never read the time said, are kept under changed
-- and so are not read again whole after each such update. The one update
-- trigger of 0021 moves one of the two counts (changed when anything a
-- search ranks by changed too).
ALTER TABLE memory_item_revisions ADD COLUMN dated INTEGER NOT NULL DEFAULT 0;

DROP TRIGGER memory_items_rev_update;

CREATE TRIGGER memory_items_rev_update AFTER UPDATE ON memory_items
    WHEN old.embedding IS NOT new.embedding OR old.model IS NOT new.model OR old.dims IS NOT new.dims
        OR old.conversation IS NOT new.conversation OR old.source IS NOT new.source
        OR old.tenant IS NOT new.tenant OR old.user_id IS NOT new.user_id OR old.id IS NOT new.id
        OR old.text IS NOT new.text OR old.said_at IS NOT new.said_at
BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, changed, dated)
        SELECT old.tenant, old.user_id, ranked, 1 - ranked FROM (SELECT
            old.embedding IS NOT new.embedding OR old.model IS NOT new.model OR old.dims IS NOT new.dims
            OR old.conversation IS NOT new.conversation OR old.source IS NOT new.source
            OR old.tenant IS NOT new.tenant OR old.user_id IS NOT new.user_id OR old.id IS NOT new.id
            OR old.text IS NOT new.text AS ranked)
        WHERE true
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + excluded.changed, dated = dated + excluded.dated;
    INSERT INTO memory_item_revisions (tenant, user_id, changed) SELECT new.tenant, new.user_id, 1
        WHERE new.tenant IS NOT old.tenant OR new.user_id IS NOT old.user_id
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
END;
