-- The tombstones hold no id in the clear (contract.UserTombstone): a user
-- id is often an email, and an erasure that keeps it keeps who the user
-- was. They are keyed by a SHA-256 digest of the ids instead, which the
-- writers compute from the ids they write and compare.
--
-- user_tombstones replaces erasures: when the user was last erased (Unix
-- nanoseconds), and the user's revision counters at the erasure, whose
-- row of memory_item_revisions the erasure deletes (it is keyed by the
-- id). A user's counters read as the sum of both rows, so they never go
-- back, however many items the user has again after a fresh start.
CREATE TABLE user_tombstones (
    digest            BLOB    PRIMARY KEY,
    erased_at         INTEGER NOT NULL,
    added             INTEGER NOT NULL DEFAULT 0,
    changed           INTEGER NOT NULL DEFAULT 0,
    dated             INTEGER NOT NULL DEFAULT 0,
    messages_changed  INTEGER NOT NULL DEFAULT 0,
    messages_added    INTEGER NOT NULL DEFAULT 0,
    facts_changed     INTEGER NOT NULL DEFAULT 0,
    summaries_changed INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- conversation_tombstones replaces conversation_deletions: when a
-- conversation was last deleted, by the digest of (tenant, user,
-- conversation) (contract.ConversationTombstone) after the digest of its
-- user (contract.UserTombstone), whose erasure removes the user's rows.
CREATE TABLE conversation_tombstones (
    user_digest BLOB    NOT NULL,
    digest      BLOB    NOT NULL,
    deleted_at  INTEGER NOT NULL,
    PRIMARY KEY (user_digest, digest)
) WITHOUT ROWID;

-- The rows of erasures and conversation_deletions are moved into these
-- tables, digested, in Go (Store.Migrate: SQLite has no SHA-256), which
-- then drops the two tables.
