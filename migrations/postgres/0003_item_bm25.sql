-- said_at is when an item's source was said: a message's time (its capture,
-- or the time a client supplied for imported history), a summary's or
-- fact's own time otherwise. Recalled passages are dated by it. NULL (items
-- stored before it existed) reads as created_at.
ALTER TABLE memory_items ADD COLUMN said_at timestamptz;

-- Okapi BM25 over each user's items needs, per (tenant, user): the number
-- of items and their total length (memory_item_stats), each term's
-- document frequency (memory_term_df), and each term's postings with its
-- frequency in the item and the item's length (memory_item_terms). Terms
-- and lengths come from the item's tsv (the 'simple' configuration): a
-- lexeme's term frequency is its number of positions, an item's length the
-- sum of them. The statement triggers below keep the three in step with
-- every insert, update and delete of memory_items, whoever runs it.
CREATE TABLE memory_item_stats (
    tenant    text   NOT NULL,
    user_id   text   NOT NULL,
    docs      bigint NOT NULL,
    total_len bigint NOT NULL,
    PRIMARY KEY (tenant, user_id)
);

CREATE TABLE memory_term_df (
    tenant  text   NOT NULL,
    user_id text   NOT NULL,
    term    text   NOT NULL,
    df      bigint NOT NULL,
    PRIMARY KEY (tenant, user_id, term)
);

CREATE TABLE memory_item_terms (
    tenant  text    NOT NULL,
    user_id text    NOT NULL,
    term    text    NOT NULL,
    item_id bigint  NOT NULL,
    tf      integer NOT NULL,
    len     integer NOT NULL,
    PRIMARY KEY (tenant, user_id, term, item_id)
);

-- memory_bm25_apply adds (sign 1) or removes (sign -1) the statistics of
-- the items given as parallel arrays. Rows of df and stats are written in
-- key order, so concurrent writers of one user do not deadlock on them.
CREATE FUNCTION memory_bm25_apply(tenants text[], users text[], ids bigint[], tsvs tsvector[], sign integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(ids), 0) = 0 THEN
        RETURN;
    END IF;
    IF sign > 0 THEN
        INSERT INTO memory_item_terms (tenant, user_id, term, item_id, tf, len)
        SELECT r.tenant, r.user_id, t.lexeme, r.id, coalesce(cardinality(t.positions), 1), l.len
        FROM unnest(tenants, users, ids, tsvs) AS r(tenant, user_id, id, tsv)
        CROSS JOIN LATERAL (SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
                            FROM unnest(r.tsv) u) l
        CROSS JOIN LATERAL unnest(r.tsv) t
        ON CONFLICT (tenant, user_id, term, item_id) DO UPDATE SET tf = EXCLUDED.tf, len = EXCLUDED.len;
    ELSE
        DELETE FROM memory_item_terms p
        USING (SELECT r.tenant, r.user_id, r.id, t.lexeme
               FROM unnest(tenants, users, ids, tsvs) AS r(tenant, user_id, id, tsv)
               CROSS JOIN LATERAL unnest(r.tsv) t) d
        WHERE p.tenant = d.tenant AND p.user_id = d.user_id AND p.term = d.lexeme AND p.item_id = d.id;
    END IF;
    INSERT INTO memory_term_df AS f (tenant, user_id, term, df)
    SELECT r.tenant, r.user_id, t.lexeme, sign * count(*)
    FROM unnest(tenants, users, tsvs) AS r(tenant, user_id, tsv)
    CROSS JOIN LATERAL unnest(r.tsv) t
    GROUP BY r.tenant, r.user_id, t.lexeme ORDER BY r.tenant, r.user_id, t.lexeme
    ON CONFLICT (tenant, user_id, term) DO UPDATE SET df = f.df + EXCLUDED.df;
    IF sign < 0 THEN
        DELETE FROM memory_term_df f
        USING (SELECT DISTINCT r.tenant, r.user_id, t.lexeme AS term
               FROM unnest(tenants, users, tsvs) AS r(tenant, user_id, tsv)
               CROSS JOIN LATERAL unnest(r.tsv) t) d
        WHERE f.tenant = d.tenant AND f.user_id = d.user_id AND f.term = d.term AND f.df <= 0;
    END IF;
    INSERT INTO memory_item_stats AS s (tenant, user_id, docs, total_len)
    SELECT r.tenant, r.user_id, sign * count(*),
           sign * coalesce(sum((SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)
                                FROM unnest(r.tsv) u)), 0)
    FROM unnest(tenants, users, tsvs) AS r(tenant, user_id, tsv)
    GROUP BY r.tenant, r.user_id ORDER BY r.tenant, r.user_id
    ON CONFLICT (tenant, user_id) DO UPDATE SET docs = s.docs + EXCLUDED.docs,
        total_len = s.total_len + EXCLUDED.total_len;
    IF sign < 0 THEN
        DELETE FROM memory_item_stats s
        USING (SELECT DISTINCT tenant, user_id FROM unnest(tenants, users) AS r(tenant, user_id)) d
        WHERE s.tenant = d.tenant AND s.user_id = d.user_id AND s.docs <= 0;
    END IF;
END;
$$;

CREATE FUNCTION memory_items_bm25_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_bm25_apply(array_agg(tenant), array_agg(user_id), array_agg(id), array_agg(tsv), 1)
    FROM memory_bm25_new;
    RETURN NULL;
END;
$$;

CREATE FUNCTION memory_items_bm25_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_bm25_apply(array_agg(tenant), array_agg(user_id), array_agg(id), array_agg(tsv), -1)
    FROM memory_bm25_old;
    RETURN NULL;
END;
$$;

-- An update counts only when it changes what BM25 reads (an embedding
-- update, the common one, changes nothing here): the old statistics of
-- those rows are removed and the new ones added.
CREATE FUNCTION memory_items_bm25_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_bm25_apply(array_agg(o.tenant), array_agg(o.user_id), array_agg(o.id), array_agg(o.tsv), -1)
    FROM memory_bm25_old o JOIN memory_bm25_new n ON n.id = o.id
    WHERE o.tsv IS DISTINCT FROM n.tsv OR o.tenant <> n.tenant OR o.user_id <> n.user_id;
    PERFORM memory_bm25_apply(array_agg(n.tenant), array_agg(n.user_id), array_agg(n.id), array_agg(n.tsv), 1)
    FROM memory_bm25_old o JOIN memory_bm25_new n ON n.id = o.id
    WHERE o.tsv IS DISTINCT FROM n.tsv OR o.tenant <> n.tenant OR o.user_id <> n.user_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER memory_items_bm25_insert AFTER INSERT ON memory_items
    REFERENCING NEW TABLE AS memory_bm25_new
    FOR EACH STATEMENT EXECUTE FUNCTION memory_items_bm25_insert();
CREATE TRIGGER memory_items_bm25_delete AFTER DELETE ON memory_items
    REFERENCING OLD TABLE AS memory_bm25_old
    FOR EACH STATEMENT EXECUTE FUNCTION memory_items_bm25_delete();
CREATE TRIGGER memory_items_bm25_update AFTER UPDATE ON memory_items
    REFERENCING OLD TABLE AS memory_bm25_old NEW TABLE AS memory_bm25_new
    FOR EACH STATEMENT EXECUTE FUNCTION memory_items_bm25_update();

-- The statistics of the items stored before this migration.
SELECT memory_bm25_apply(array_agg(tenant), array_agg(user_id), array_agg(id), array_agg(tsv), 1)
FROM memory_items;
