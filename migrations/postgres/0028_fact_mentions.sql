-- fact_mentions records which stored message stated a fact, by which rule
-- (a pin's rule; '' for a model's extraction): enrichment is
-- at-least-once, and a statement made again from the message and by the
-- rule that made it (a redelivered exchange enriched again) counts no
-- mention more and changes nothing. A fact stated with no message (the
-- management API) has none. A mention goes with its fact (ON DELETE
-- CASCADE).
CREATE TABLE fact_mentions (
    tenant   text   NOT NULL,
    user_id  text   NOT NULL,
    message  text   NOT NULL,
    rule     text   NOT NULL,
    fact_id  bigint NOT NULL,
    PRIMARY KEY (tenant, user_id, message, rule, fact_id),
    FOREIGN KEY (tenant, user_id, fact_id) REFERENCES facts (tenant, user_id, id) ON DELETE CASCADE
);

CREATE INDEX fact_mentions_by_fact ON fact_mentions (tenant, user_id, fact_id);

-- Facts stored before this migration name the message that stated them
-- last: that statement is recorded.
INSERT INTO fact_mentions (tenant, user_id, message, rule, fact_id)
    SELECT tenant, user_id, source_message, pin_rule, id FROM facts WHERE source_message <> '';
