-- The savings counters gain the prompt cache: the prompt tokens sent that
-- repeat the previous request's prompt of the same conversation from the
-- first byte (what a provider's cache can serve), and those the provider
-- reported reading from its cache.
ALTER TABLE savings ADD COLUMN tokens_repeated bigint NOT NULL DEFAULT 0;
ALTER TABLE savings ADD COLUMN tokens_cached bigint NOT NULL DEFAULT 0;
