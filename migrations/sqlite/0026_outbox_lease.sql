-- Several processes may open one SQLite file (`gateway serve` and
-- `gateway worker`, or two gateways). outbox_leases lets one consumer at a
-- time drain a queue (the capture outbox), so that two processes never
-- split a backlog and store a conversation's turns out of order: a lease
-- is taken and renewed in a write transaction and runs out at expires_at
-- (Unix nanoseconds), so a crashed holder's lease passes to the next one.
CREATE TABLE outbox_leases (
    queue      TEXT    PRIMARY KEY, -- the queue's table: outbox
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);

-- conv names the conversation of a queued turn (EnqueueTurn; NULL for
-- entries queued without one, as before), so that a gateway sends a
-- conversation's next turn behind the turns another process queued. Both
-- outboxes are one Outbox type in Go, so both get the column; only the
-- capture outbox is asked (Queued), so only it is indexed.
ALTER TABLE outbox ADD COLUMN conv TEXT;
CREATE INDEX outbox_by_conv ON outbox (conv) WHERE conv IS NOT NULL;
ALTER TABLE enrich_outbox ADD COLUMN conv TEXT;
