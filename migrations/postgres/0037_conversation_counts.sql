-- conversations.message_count counts the conversation's live messages
-- (superseded_at IS NULL), as SQLite's column of the same name does. Each
-- read of a conversation's page, and the list of a user's conversations,
-- counted them (count(*) over the conversation: 11 ms a page at 20,000
-- messages, 103 ms at 200,000, BenchmarkConversationPageLong); they read
-- this column instead.
--
-- Statement triggers keep it, one update of each conversation a statement
-- changed (by the live messages it inserted, superseded, restored, moved
-- or deleted), whichever writer ran the statement: the group commit,
-- memgate_append_turn, an adoption, an erasure, plain SQL. A statement
-- that changes no message's liveness updates no conversation. The
-- conversation rows a save writes to are locked by it already (its
-- upsert), so the update waits on nothing new.
--
-- Partial indexes of the superseded messages serve the inspector's
-- branches (superseded messages, in the order they left the live branch)
-- without reading the live ones: 248 ms at 200,000 live messages before
-- (BenchmarkBranchesLong).
--
-- Locks: the migration is one transaction (the migrator's), so until it
-- commits the ALTER holds ACCESS EXCLUSIVE on conversations (every read
-- and save of a conversation waits) and the triggers and the index hold
-- SHARE ROW EXCLUSIVE and SHARE on messages (writes wait), while the fill
-- scans the live messages and the index build all of them: 1.2 s at
-- 200,000 messages (0.4 s fill, 0.7 s index), growing with the table.
-- IF NOT EXISTS lets an operator build the index beforehand with CREATE
-- INDEX CONCURRENTLY (README, Upgrading), which writes do not wait on.
ALTER TABLE conversations ADD COLUMN message_count integer NOT NULL DEFAULT 0;

UPDATE conversations c SET message_count = m.n
FROM (SELECT tenant, user_id, conversation, count(*) AS n FROM messages
      WHERE superseded_at IS NULL GROUP BY tenant, user_id, conversation) m
WHERE c.tenant = m.tenant AND c.user_id = m.user_id AND c.id = m.conversation;

-- Each function adds to every conversation its statement's change of
-- live messages.
CREATE FUNCTION memgate_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations c SET message_count = c.message_count + d.n
    FROM (SELECT tenant, user_id, conversation, count(*) AS n FROM new_messages
          WHERE superseded_at IS NULL GROUP BY tenant, user_id, conversation) d
    WHERE c.tenant = d.tenant AND c.user_id = d.user_id AND c.id = d.conversation;
    RETURN NULL;
END $$;

CREATE FUNCTION memgate_count_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations c SET message_count = c.message_count + d.n
    FROM (SELECT tenant, user_id, conversation, sum(n) AS n FROM (
              SELECT tenant, user_id, conversation, 1 AS n FROM new_messages WHERE superseded_at IS NULL
              UNION ALL
              SELECT tenant, user_id, conversation, -1 FROM old_messages WHERE superseded_at IS NULL) x
          GROUP BY tenant, user_id, conversation HAVING sum(n) <> 0) d
    WHERE c.tenant = d.tenant AND c.user_id = d.user_id AND c.id = d.conversation;
    RETURN NULL;
END $$;

CREATE FUNCTION memgate_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations c SET message_count = c.message_count - d.n
    FROM (SELECT tenant, user_id, conversation, count(*) AS n FROM old_messages
          WHERE superseded_at IS NULL GROUP BY tenant, user_id, conversation) d
    WHERE c.tenant = d.tenant AND c.user_id = d.user_id AND c.id = d.conversation;
    RETURN NULL;
END $$;

CREATE FUNCTION memgate_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations SET message_count = 0 WHERE message_count <> 0;
    RETURN NULL;
END $$;

CREATE TRIGGER messages_count_insert AFTER INSERT ON messages
    REFERENCING NEW TABLE AS new_messages
    FOR EACH STATEMENT EXECUTE FUNCTION memgate_count_inserted();
CREATE TRIGGER messages_count_update AFTER UPDATE ON messages
    REFERENCING OLD TABLE AS old_messages NEW TABLE AS new_messages
    FOR EACH STATEMENT EXECUTE FUNCTION memgate_count_updated();
CREATE TRIGGER messages_count_delete AFTER DELETE ON messages
    REFERENCING OLD TABLE AS old_messages
    FOR EACH STATEMENT EXECUTE FUNCTION memgate_count_deleted();
CREATE TRIGGER messages_count_truncate AFTER TRUNCATE ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION memgate_count_truncated();

CREATE INDEX IF NOT EXISTS messages_superseded ON messages (tenant, user_id, conversation, superseded_at, seq)
    WHERE superseded_at IS NOT NULL;
