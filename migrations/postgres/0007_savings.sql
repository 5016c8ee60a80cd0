-- savings holds the memory accounting of chat requests per tenant and time
-- bucket: what the prompts would have cost with the full stored history
-- against what memory sent, and the requests forwarded without memory. The
-- inspector draws its savings chart from it; gateways add to a bucket, so
-- several processes share one row.
CREATE TABLE savings (
    tenant          text        NOT NULL,
    bucket          timestamptz NOT NULL,
    requests        bigint      NOT NULL DEFAULT 0,
    tokens_original bigint      NOT NULL DEFAULT 0,
    tokens_sent     bigint      NOT NULL DEFAULT 0,
    degraded        bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, bucket)
);
