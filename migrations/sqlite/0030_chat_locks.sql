-- chat_locks serializes, across the processes sharing this file, the
-- storing of a full-history chat's first turn and of its continuation
-- (record.ChatLocker): a row per chat being stored, its key a hash of the
-- chat (contract.ChatKeys), held by one LockChats call until it is
-- released or expires_at (Unix nanoseconds) passes. It holds no text.
CREATE TABLE chat_locks (
    key        INTEGER PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
