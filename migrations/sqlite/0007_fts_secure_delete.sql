-- Deleting a memory item (an erasure, a superseded branch, a deleted fact)
-- removes its terms from the full-text index at once, instead of leaving
-- them in the index segments behind a delete marker until a merge: erased
-- text must leave the file (see internal/sqlitestore/erasure.go). FTS5 keeps
-- the setting in the index's own config table.
INSERT INTO memory_items_fts (memory_items_fts, rank) VALUES ('secure-delete', 1);
