-- savings holds the memory accounting of chat requests per tenant and time
-- bucket (start in Unix nanoseconds): what the prompts would have cost with
-- the full stored history against what memory sent, and the requests
-- forwarded without memory. The inspector draws its savings chart from it;
-- gateways add to a bucket, so several processes share one row.
CREATE TABLE savings (
    tenant          TEXT    NOT NULL,
    bucket          INTEGER NOT NULL,
    requests        INTEGER NOT NULL DEFAULT 0,
    tokens_original INTEGER NOT NULL DEFAULT 0,
    tokens_sent     INTEGER NOT NULL DEFAULT 0,
    degraded        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, bucket)
) WITHOUT ROWID;
