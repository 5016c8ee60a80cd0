-- memory_item_revisions.dated counts the updates of an item that change
-- its time said alone (a fact stated again, turn after turn): the items a
-- search returns are kept under changed + dated, while the vectors and the
-- full-text index, which never read the time said, are kept under changed
-- and so are not read again whole after each such update. An update moves
-- one of the two counts (changed when anything else the trigger of 0010
-- watches changed too).
ALTER TABLE memory_item_revisions ADD COLUMN dated bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION memory_items_revise() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, added, max_id)
        VALUES (NEW.tenant, NEW.user_id, 1, NEW.id)
        ON CONFLICT (tenant, user_id) DO UPDATE SET
            added = r.added + 1,
            changed = r.changed + CASE WHEN EXCLUDED.max_id <= r.max_id THEN 1 ELSE 0 END,
            max_id = greatest(r.max_id, EXCLUDED.max_id);
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND (OLD.tenant, OLD.user_id, OLD.id, OLD.conversation, OLD.kind, OLD.source, OLD.chunk,
            OLD.content, OLD.embedding, OLD.dims, OLD.model, OLD.created_at)
        IS NOT DISTINCT FROM (NEW.tenant, NEW.user_id, NEW.id, NEW.conversation, NEW.kind, NEW.source, NEW.chunk,
            NEW.content, NEW.embedding, NEW.dims, NEW.model, NEW.created_at) THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, dated)
        VALUES (OLD.tenant, OLD.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET dated = r.dated + 1;
        RETURN NULL;
    END IF;
    INSERT INTO memory_item_revisions AS r (tenant, user_id, changed)
    VALUES (OLD.tenant, OLD.user_id, 1)
    ON CONFLICT (tenant, user_id) DO UPDATE SET changed = r.changed + 1;
    IF TG_OP = 'UPDATE' AND (NEW.tenant, NEW.user_id) IS DISTINCT FROM (OLD.tenant, OLD.user_id) THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, changed, max_id)
        VALUES (NEW.tenant, NEW.user_id, 1, NEW.id)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = r.changed + 1,
            max_id = greatest(r.max_id, EXCLUDED.max_id);
    END IF;
    RETURN NULL;
END;
$$;
