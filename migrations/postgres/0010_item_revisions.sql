-- memory_item_revisions counts, per user, the changes to their memory items,
-- so a gateway holding the user's vectors, full-text index and items in
-- memory (internal/itemindex) can tell in one primary key lookup whether
-- they are still current, whichever process wrote:
--
--   * added counts inserts. New rows read as the rows above the highest id
--     a reader holds, so after inserts only those are read;
--   * changed counts deletes and updates of anything a search reads or
--     returns, after which everything is read again;
--   * max_id is the highest id ever inserted for the user. Ids are taken
--     when a row is inserted, not when it commits: a transaction that took
--     a lower id than one committed before it (its insert raced another
--     writer of the user) would be missed by a reader that already read
--     the higher id, so such an insert counts as a change too. The triggers
--     of one user's writers take turns on the user's row at their commits
--     (see the triggers below), so each sees the max_id of every insert
--     committed before it.
--
-- The counters never go back: an erasure deletes the user's items (which
-- counts as a change) and leaves this row in place, so a cache read before
-- the erasure can never pass for a state after it, however many items the
-- user has again.
CREATE TABLE memory_item_revisions (
    tenant  text COLLATE "C" NOT NULL,
    user_id text COLLATE "C" NOT NULL,
    added   bigint NOT NULL DEFAULT 0,
    changed bigint NOT NULL DEFAULT 0,
    max_id  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, user_id)
);

-- The counters of the users with items already, as if their items had
-- just been inserted.
INSERT INTO memory_item_revisions (tenant, user_id, added, max_id)
SELECT tenant, user_id, count(*), max(id) FROM memory_items GROUP BY 1, 2;

-- The counters move when a writer commits: the triggers are constraint
-- triggers, deferred to the commit, so the user's row is locked only from
-- there to the end of the commit. A writer then waits for the row only
-- behind another writer's commit, which waits for nothing else: taken
-- earlier and held to the commit (as the BM25 statistics' advisory locks
-- are), the row would have ordered every writer of the user's items
-- against the locks each takes after its first write (a conversation's row
-- by Adopt and AddItems, say), and writers could deadlock where they did
-- not before. They are row-level (constraint triggers cannot be
-- statement-level); AddItems, the bulk writer, writes one row per
-- statement anyway.
CREATE FUNCTION memory_items_revise() RETURNS trigger
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

CREATE CONSTRAINT TRIGGER memory_items_rev_insert AFTER INSERT ON memory_items
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memory_items_revise();
CREATE CONSTRAINT TRIGGER memory_items_rev_delete AFTER DELETE ON memory_items
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memory_items_revise();
-- An update counts when it changes any column a search reads or returns
-- (an update that rewrites a row as it was counts nothing), for the old
-- row's user and, when it moved, the new row's.
CREATE CONSTRAINT TRIGGER memory_items_rev_update AFTER UPDATE ON memory_items
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant OR OLD.user_id IS DISTINCT FROM NEW.user_id
        OR OLD.id IS DISTINCT FROM NEW.id
        OR OLD.conversation IS DISTINCT FROM NEW.conversation OR OLD.kind IS DISTINCT FROM NEW.kind
        OR OLD.source IS DISTINCT FROM NEW.source OR OLD.chunk IS DISTINCT FROM NEW.chunk
        OR OLD.content IS DISTINCT FROM NEW.content OR OLD.embedding IS DISTINCT FROM NEW.embedding
        OR OLD.dims IS DISTINCT FROM NEW.dims OR OLD.model IS DISTINCT FROM NEW.model
        OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.said_at IS DISTINCT FROM NEW.said_at)
    EXECUTE FUNCTION memory_items_revise();

-- TRUNCATE fires no delete trigger: every user's cache is read again.
CREATE FUNCTION memory_items_rev_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_item_revisions SET changed = changed + 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER memory_items_rev_truncate AFTER TRUNCATE ON memory_items
    FOR EACH STATEMENT EXECUTE FUNCTION memory_items_rev_truncate();
