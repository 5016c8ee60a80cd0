-- said_at is when an item's source was said, in Unix nanoseconds: a
-- message's time (its capture, or the time a client supplied for imported
-- history), a summary's or fact's own time otherwise. Recalled passages are
-- dated by it. NULL (items stored before it existed) reads as created_at.
ALTER TABLE memory_items ADD COLUMN said_at INTEGER;

-- memory_items_by_user serves the full-text index kept in memory, which
-- reads a user's items above the highest id it holds.
CREATE INDEX memory_items_by_user ON memory_items (tenant, user_id);

-- A change of an item's text changes what full-text search reads: it counts
-- as a change in memory_item_revisions, so readers holding the user's text
-- index in memory read it again.
CREATE TRIGGER memory_items_rev_text AFTER UPDATE OF text ON memory_items
    WHEN old.text IS NOT new.text
BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
END;
