-- A message a full-history client's exchange stored carries its Stamp
-- (memory.Stamp): its position among the non-system messages of that
-- client's history (pos), and the digest of the history through it
-- (digest, 16 bytes: memory.Digest). A request whose history is longer
-- than one request stores (memory.CutHistory) compares the digest of the
-- live message just before its window with its own, and reads further
-- only where they differ, to see an edit in the part it leaves out.
-- Messages stored before this migration, or without a resent history
-- (a newest-only client's), have none (NULL).
ALTER TABLE messages ADD COLUMN pos INTEGER;
ALTER TABLE messages ADD COLUMN digest BLOB;

CREATE INDEX messages_live_pos ON messages (tenant, user_id, conversation, pos)
    WHERE superseded_at IS NULL AND digest IS NOT NULL;
