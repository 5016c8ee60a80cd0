-- Bulk writes of memory_items spent most of their time keeping the BM25
-- statistics of 0003: about 23 postings per item were upserted one index
-- probe at a time, in item order, compared under the database's collation.
-- The statistics stay the same (same rows, same numbers); only how they are
-- kept changes:
--
--   * tenant, user_id and term of the three tables compare bytewise
--     (COLLATE "C"): they are only ever looked up by equality, which a
--     deterministic collation decides bytewise anyway, and "C" skips the
--     locale's comparison on every index step;
--   * each statement's rows are written sorted by the primary key (sorted
--     bytewise too), so the index is filled in order: with the collation,
--     this took the postings' insert from about 3 to 2 CPU-seconds per
--     10,000 items;
--   * postings of new rows are plain inserts: an item's id is new, and an
--     update removes the old postings of a changed item before adding its
--     new ones in the same statement, so a posting cannot exist already;
--   * a statement first takes a transaction advisory lock per user whose
--     statistics it changes (memory_bm25_lock): writers of one user's
--     statistics take turns to commit, so they never deadlock on the rows
--     and never lose a count;
--   * a user whose last item goes (an erasure) loses every row of theirs at
--     once, by key range, instead of term by term;
--   * the postings of removed items are looked up by their whole key: 0003
--     let the planner join them on (tenant, user, item id), an index prefix
--     without the term, so each removed item scanned all of its user's
--     postings (minutes for an update of a thousand items).
ALTER TABLE memory_item_stats
    ALTER COLUMN tenant TYPE text COLLATE "C",
    ALTER COLUMN user_id TYPE text COLLATE "C";
ALTER TABLE memory_term_df
    ALTER COLUMN tenant TYPE text COLLATE "C",
    ALTER COLUMN user_id TYPE text COLLATE "C",
    ALTER COLUMN term TYPE text COLLATE "C";
ALTER TABLE memory_item_terms
    ALTER COLUMN tenant TYPE text COLLATE "C",
    ALTER COLUMN user_id TYPE text COLLATE "C",
    ALTER COLUMN term TYPE text COLLATE "C";

-- memory_bm25_lock takes the transaction advisory locks of the users'
-- statistics (key space 5 of hashtextextended), in key order: one writer of
-- a user's statistics at a time, to its commit, so writers never deadlock on
-- the statistics rows, whatever order their items come in and whether the
-- rows exist yet, and never lose a count. A statement that fires two
-- triggers (INSERT ... ON CONFLICT DO UPDATE fires the insert and the update
-- one), or a transaction of several statements, takes them in one order
-- only if it calls this first for all of its users, as AddItems does.
CREATE FUNCTION memory_bm25_lock(tenants text[], users text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    k bigint;
BEGIN
    FOR k IN SELECT DISTINCT hashtextextended('bm25/' || r.tenant || '/' || r.user_id, 5)
             FROM unnest(tenants, users) AS r(tenant, user_id) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
END;
$$;

-- memory_bm25_apply adds (sign 1) or removes (sign -1) the statistics of
-- the items given as parallel arrays, in one statement per table: the
-- users' totals, then the terms' document frequencies, then the postings,
-- each in primary key order.
CREATE OR REPLACE FUNCTION memory_bm25_apply(tenants text[], users text[], ids bigint[], tsvs tsvector[], sign integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(ids), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM memory_bm25_lock(tenants, users);
    INSERT INTO memory_item_stats AS s (tenant, user_id, docs, total_len)
    SELECT r.tenant COLLATE "C", r.user_id COLLATE "C", sign * count(*),
           sign * coalesce(sum((SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)
                                FROM unnest(r.tsv) u)), 0)
    FROM unnest(tenants, users, tsvs) AS r(tenant, user_id, tsv)
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (tenant, user_id) DO UPDATE SET docs = s.docs + EXCLUDED.docs,
        total_len = s.total_len + EXCLUDED.total_len;
    INSERT INTO memory_term_df AS f (tenant, user_id, term, df)
    SELECT r.tenant COLLATE "C", r.user_id COLLATE "C", t.lexeme COLLATE "C", sign * count(*)
    FROM unnest(tenants, users, tsvs) AS r(tenant, user_id, tsv)
    CROSS JOIN LATERAL unnest(r.tsv) t
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant, user_id, term) DO UPDATE SET df = f.df + EXCLUDED.df;
    IF sign > 0 THEN
        INSERT INTO memory_item_terms (tenant, user_id, term, item_id, tf, len)
        SELECT r.tenant COLLATE "C", r.user_id COLLATE "C", t.lexeme COLLATE "C", r.id,
               coalesce(cardinality(t.positions), 1), l.len
        FROM unnest(tenants, users, ids, tsvs) AS r(tenant, user_id, id, tsv)
        CROSS JOIN LATERAL (SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
                            FROM unnest(r.tsv) u) l
        CROSS JOIN LATERAL unnest(r.tsv) t
        ORDER BY 1, 2, 3, 4;
        RETURN;
    END IF;
    -- Users left without items lose all their rows by key range.
    DELETE FROM memory_item_stats s
    USING (SELECT DISTINCT tenant, user_id FROM unnest(tenants, users) AS r(tenant, user_id)) d
    WHERE s.tenant = d.tenant AND s.user_id = d.user_id AND s.docs <= 0;
    DELETE FROM memory_term_df f
    USING (SELECT DISTINCT tenant, user_id FROM unnest(tenants, users) AS r(tenant, user_id)) d
    WHERE f.tenant = d.tenant AND f.user_id = d.user_id
      AND NOT EXISTS (SELECT 1 FROM memory_item_stats s WHERE s.tenant = d.tenant AND s.user_id = d.user_id);
    DELETE FROM memory_item_terms p
    USING (SELECT DISTINCT tenant, user_id FROM unnest(tenants, users) AS r(tenant, user_id)) d
    WHERE p.tenant = d.tenant AND p.user_id = d.user_id
      AND NOT EXISTS (SELECT 1 FROM memory_item_stats s WHERE s.tenant = d.tenant AND s.user_id = d.user_id);
    -- The others lose the terms no item has any more, and the postings of
    -- the items removed: each looked up by its whole key (the keys are
    -- materialized first, so no plan probes the postings by a prefix).
    WITH d AS MATERIALIZED (
        SELECT DISTINCT r.tenant, r.user_id, t.lexeme AS term
        FROM unnest(tenants, users, tsvs) AS r(tenant, user_id, tsv)
        CROSS JOIN LATERAL unnest(r.tsv) t
        WHERE EXISTS (SELECT 1 FROM memory_item_stats s WHERE s.tenant = r.tenant AND s.user_id = r.user_id))
    DELETE FROM memory_term_df f USING d
    WHERE f.tenant = d.tenant AND f.user_id = d.user_id AND f.term = d.term AND f.df <= 0;
    WITH d AS MATERIALIZED (
        SELECT r.tenant, r.user_id, t.lexeme AS term, r.id
        FROM unnest(tenants, users, ids, tsvs) AS r(tenant, user_id, id, tsv)
        CROSS JOIN LATERAL unnest(r.tsv) t
        WHERE EXISTS (SELECT 1 FROM memory_item_stats s WHERE s.tenant = r.tenant AND s.user_id = r.user_id))
    DELETE FROM memory_item_terms p USING d
    WHERE p.tenant = d.tenant AND p.user_id = d.user_id AND p.term = d.term AND p.item_id = d.id;
END;
$$;
