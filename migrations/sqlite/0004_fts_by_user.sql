-- The full-text index also indexes each item's user id, so a search can be
-- scoped to one user inside FTS5 (user_id : "<id>" AND (...)): FTS5 then
-- intersects the user's posting list with the query terms, and ranks only
-- that user's matches, instead of ranking every user's matching rows and
-- filtering them afterwards (which made a search cost grow with the whole
-- store). The tenant is still checked in SQL.
DROP TRIGGER memory_items_fts_insert;
DROP TRIGGER memory_items_fts_delete;
DROP TRIGGER memory_items_fts_update;
DROP TABLE memory_items_fts;

CREATE VIRTUAL TABLE memory_items_fts USING fts5(
    text,
    user_id,
    content = 'memory_items',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_items_fts (rowid, text, user_id) VALUES (new.id, new.text, new.user_id);
END;

CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_items_fts (memory_items_fts, rowid, text, user_id) VALUES ('delete', old.id, old.text, old.user_id);
END;

CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF text, user_id ON memory_items BEGIN
    INSERT INTO memory_items_fts (memory_items_fts, rowid, text, user_id) VALUES ('delete', old.id, old.text, old.user_id);
    INSERT INTO memory_items_fts (rowid, text, user_id) VALUES (new.id, new.text, new.user_id);
END;

INSERT INTO memory_items_fts (memory_items_fts) VALUES ('rebuild');
