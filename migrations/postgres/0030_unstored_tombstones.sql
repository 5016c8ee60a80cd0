-- A conversation's tombstone says whether the conversation was stored when
-- it was deleted: one that was not (its turns still queued, or an id nobody
-- used) is deleted once contract.UnstoredTombstoneLife has passed, when it
-- can refuse nothing any more; the others keep until their user's erasure.
-- Tombstones written before this migration count as stored.
ALTER TABLE conversation_tombstones ADD COLUMN stored boolean NOT NULL DEFAULT true;

CREATE INDEX conversation_tombstones_unstored ON conversation_tombstones (deleted_at) WHERE NOT stored;
