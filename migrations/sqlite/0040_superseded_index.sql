-- messages_superseded serves the inspector's branches (a conversation's
-- superseded messages, in the order they left the live branch) without
-- reading its live messages: the inspector's page of a conversation of
-- 20,000 messages read them all on every view (BenchmarkConversationPage).
CREATE INDEX messages_superseded ON messages (tenant, user_id, conversation, superseded_at, seq)
    WHERE superseded_at IS NOT NULL;
