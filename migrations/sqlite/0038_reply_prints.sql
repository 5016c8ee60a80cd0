-- An assistant message with text carries its print (reply, 16 bytes: the
-- Sum of memory.Message.Print, a digest of its role and text), so that a
-- request resending only a window of its history (a client that keeps its
-- last messages, or drops its oldest turns once its model's context
-- fills) and naming no conversation finds the conversation holding the
-- newest reply it resends, by tenant, user and print, among live messages.
-- Messages stored before this migration have none (NULL): the digest is
-- computed by memgate, not SQL, and a chat stored before it is found
-- again from its first reply stored after it.
ALTER TABLE messages ADD COLUMN reply BLOB;

CREATE INDEX messages_reply ON messages (tenant, user_id, reply)
    WHERE superseded_at IS NULL AND reply IS NOT NULL;
