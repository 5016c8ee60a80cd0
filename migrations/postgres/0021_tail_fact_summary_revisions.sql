-- The rest of SQLite's revision counters (its migrations 0014 and 0015),
-- so one engine cache (internal/engine/cache) keeps a conversation's
-- newest turns, a user's facts and a conversation's latest summary in
-- memory for either store, and tells in the one primary key lookup it
-- makes per request whether they are still current, whichever process
-- wrote:
--
--   * messages_added counts inserts of the user's messages; with
--     messages_changed (0011: updates and deletes) it names one state of
--     the user's messages, since neither goes back;
--   * facts_changed counts every insert, update and delete of the user's
--     facts, summaries_changed of their summaries.
--
-- Like the other counters they never go back (an erasure moves them and
-- keeps the user's row), and they start at 0: nothing was kept under them
-- before this migration.
ALTER TABLE memory_item_revisions
    ADD COLUMN messages_added bigint NOT NULL DEFAULT 0,
    ADD COLUMN facts_changed bigint NOT NULL DEFAULT 0,
    ADD COLUMN summaries_changed bigint NOT NULL DEFAULT 0;

-- The counters move when the writer commits, as every other counter does
-- (see 0010): constraint triggers deferred to the commit lock the user's
-- row only from there on, so writers cannot deadlock on it.
CREATE OR REPLACE FUNCTION messages_revise() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, messages_added)
        VALUES (NEW.tenant, NEW.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_added = r.messages_added + 1;
        RETURN NULL;
    END IF;
    INSERT INTO memory_item_revisions AS r (tenant, user_id, messages_changed)
    VALUES (OLD.tenant, OLD.user_id, 1)
    ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = r.messages_changed + 1;
    IF TG_OP = 'UPDATE' AND (NEW.tenant, NEW.user_id) IS DISTINCT FROM (OLD.tenant, OLD.user_id) THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, messages_changed)
        VALUES (NEW.tenant, NEW.user_id, 1)
        ON CONFLICT (tenant, user_id) DO UPDATE SET messages_changed = r.messages_changed + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER messages_rev_insert AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION messages_revise();

-- knowledge_revise moves facts_changed for a write of facts and
-- summaries_changed for one of summaries: the old row's user's and, when
-- the row moved to another user, the new row's.
CREATE FUNCTION knowledge_revise() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    f int := CASE WHEN TG_TABLE_NAME = 'facts' THEN 1 ELSE 0 END;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, facts_changed, summaries_changed)
        VALUES (OLD.tenant, OLD.user_id, f, 1 - f)
        ON CONFLICT (tenant, user_id) DO UPDATE SET facts_changed = r.facts_changed + f,
            summaries_changed = r.summaries_changed + 1 - f;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE'
            AND (NEW.tenant, NEW.user_id) IS DISTINCT FROM (OLD.tenant, OLD.user_id)) THEN
        INSERT INTO memory_item_revisions AS r (tenant, user_id, facts_changed, summaries_changed)
        VALUES (NEW.tenant, NEW.user_id, f, 1 - f)
        ON CONFLICT (tenant, user_id) DO UPDATE SET facts_changed = r.facts_changed + f,
            summaries_changed = r.summaries_changed + 1 - f;
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER facts_rev AFTER INSERT OR UPDATE OR DELETE ON facts
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION knowledge_revise();
CREATE CONSTRAINT TRIGGER summaries_rev AFTER INSERT OR UPDATE OR DELETE ON summaries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION knowledge_revise();

-- TRUNCATE fires no delete trigger: every user's facts (summaries) are
-- read again.
CREATE FUNCTION knowledge_rev_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'facts' THEN
        UPDATE memory_item_revisions SET facts_changed = facts_changed + 1;
    ELSE
        UPDATE memory_item_revisions SET summaries_changed = summaries_changed + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER facts_rev_truncate AFTER TRUNCATE ON facts
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_rev_truncate();
CREATE TRIGGER summaries_rev_truncate AFTER TRUNCATE ON summaries
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_rev_truncate();
