-- fact_mentions records which stored message stated a fact, by which rule
-- (a pin's rule; '' for a model's extraction): enrichment is
-- at-least-once, and a statement made again from the message and by the
-- rule that made it (a redelivered exchange enriched again) counts no
-- mention more and changes nothing. A fact stated with no message (the
-- management API) has none.
CREATE TABLE fact_mentions (
    tenant   TEXT    NOT NULL,
    user_id  TEXT    NOT NULL,
    message  TEXT    NOT NULL,
    rule     TEXT    NOT NULL,
    fact_id  INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, message, rule, fact_id)
) WITHOUT ROWID;

CREATE INDEX fact_mentions_by_fact ON fact_mentions (tenant, user_id, fact_id);

-- A fact's mentions go with it, however it is deleted.
CREATE TRIGGER fact_mentions_follow_fact AFTER DELETE ON facts BEGIN
    DELETE FROM fact_mentions WHERE tenant = old.tenant AND user_id = old.user_id AND fact_id = old.id;
END;

-- Facts stored before this migration name the message that stated them
-- last: that statement is recorded.
INSERT INTO fact_mentions (tenant, user_id, message, rule, fact_id)
    SELECT tenant, user_id, source_message, pin_rule, id FROM facts WHERE source_message != '';
