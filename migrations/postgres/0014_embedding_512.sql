-- The built-in sentence encoder (recall.embeddings.provider: encoder, the
-- default) makes 512-dimension vectors. Like the 384-dimension ones (the
-- local embedder, 0001_init), they get an HNSW index through an expression
-- cast, used by searches of users too large for the in-memory index
-- (pgstore.searchVectorSQL repeats the expression and predicate verbatim).
CREATE INDEX memory_items_embedding_512 ON memory_items
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WHERE dims = 512;
