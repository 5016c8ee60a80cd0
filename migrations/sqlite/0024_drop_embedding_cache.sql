-- The embeddings are kept in the engine's one cache, in memory
-- (internal/engine/cache's Embeddings), not in this table.
DROP TABLE embedding_cache;
