-- memory_items_times lets a gateway read again only the times said of the
-- items it keeps when a fact stated again moved their user's dated count
-- (itemindex's LoadSaidAt); it replaces memory_items_by_user (0006).
CREATE INDEX memory_items_times ON memory_items (tenant, user_id, id, said_at, created_at);
DROP INDEX memory_items_by_user;
