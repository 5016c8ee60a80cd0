-- said_at is when an item's source was said, in Unix nanoseconds: a
-- message's time (its capture, or the time a client supplied for imported
-- history), a summary's or fact's own time otherwise. Recalled passages are
-- dated by it. NULL (items stored before it existed) reads as created_at.
ALTER TABLE memory_items ADD COLUMN said_at INTEGER;
