-- A change of an item's said_at (an upsert that brings the time a message
-- was said) changes what a search returns: it counts as a change in
-- memory_item_revisions, so readers holding the user's items in memory read
-- them again.
CREATE TRIGGER memory_items_rev_said_at AFTER UPDATE OF said_at ON memory_items
    WHEN old.said_at IS NOT new.said_at
BEGIN
    INSERT INTO memory_item_revisions (tenant, user_id, changed) VALUES (new.tenant, new.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET changed = changed + 1;
END;
