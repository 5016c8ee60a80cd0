-- queue_purges lists the erasures' and conversation deletions' purges of
-- the capture and enrichment queues not known to be done (the queues did
-- not answer, or the process stopped first): every process retries them at
-- start and periodically, and deletes a row once a purge covering it went
-- through (record.Capturer). Keyed by the tombstone digest of what was
-- erased (memgate_user_tombstone, or memgate_conversation_tombstone when
-- conversation), never the ids; voided_at is the erasure's or deletion's
-- time: queued entries dated at or before it are purged.
CREATE TABLE queue_purges (
    digest       bytea       PRIMARY KEY,
    conversation boolean     NOT NULL,
    voided_at    timestamptz NOT NULL
);
