-- user_erasures lists the erasures under way (internal/store/sqlite,
-- erasechunks.go): DeleteUser writes the user's tombstone and a row here in
-- one short write transaction, then deletes the user's rows in chunks, each
-- its own write transaction, and deletes this row with the last chunk.
-- While the row is here every read of the user answers nothing, and a store
-- that opens finishes the erasures it lists (a process that stopped
-- mid-way). It holds the ids in the clear, as the rows still to delete do,
-- and no longer than they are stored.
CREATE TABLE user_erasures (
    tenant    TEXT    NOT NULL,
    user_id   TEXT    NOT NULL,
    erased_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
) WITHOUT ROWID;
