-- memory_items_times lets a gateway read again only the times of the items
-- it keeps in memory when a fact stated again moved their user's dated
-- count (itemindex's LoadSaidAt): a few pages of this index instead of a
-- page of the table, with its vector, per item. It also serves what
-- memory_items_by_user (0006) served, the reads of a user's items above
-- an id, which it replaces.
CREATE INDEX memory_items_times ON memory_items (tenant, user_id, id, said_at, created_at);
DROP INDEX memory_items_by_user;
