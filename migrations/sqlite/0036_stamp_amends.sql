-- A message may carry an Amend (memory.Amend, 16 bytes, XOR): what the
-- Stamps of its conversation's messages at or past its position sum
-- otherwise than the history its full-history client now sends, after
-- the client edited a message its requests no longer store. The edit
-- supersedes the edited message only and amends one row, instead of
-- superseding (rewinding) every message after it. NULL: none.
ALTER TABLE messages ADD COLUMN amend BLOB;

CREATE INDEX messages_amends ON messages (tenant, user_id, conversation, pos)
    WHERE amend IS NOT NULL;
