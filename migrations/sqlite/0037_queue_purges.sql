-- queue_purges lists the erasures' and conversation deletions' purges of
-- the capture and enrichment queues not known to be done (the queues did
-- not answer, or the process stopped first): every process retries them at
-- start and periodically, and deletes a row once a purge covering it went
-- through (record.Capturer). Keyed by the tombstone digest of what was
-- erased (contract.UserTombstone, or ConversationTombstone with
-- conversation = 1), never the ids; voided_at is the erasure's or
-- deletion's time (Unix nanoseconds): queued entries dated at or before it
-- are purged.
CREATE TABLE queue_purges (
    digest       BLOB    PRIMARY KEY,
    conversation INTEGER NOT NULL,
    voided_at    INTEGER NOT NULL
) WITHOUT ROWID;
