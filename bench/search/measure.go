package main

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
)

// latency summarizes timed calls.
type latency struct {
	p50, p99 time.Duration
	n        int
}

// result is what one size measured; zero durations were not measured.
type result struct {
	items, users int
	load         loadStats
	build        time.Duration
	built        bool
	exact        latency // no HNSW index: the tenant/user btree index, exact
	hnsw         latency // HNSW index forced
	planner      latency // index present, the planner's choice
	plannerPlan  string
	recall       float64 // HNSW recall@limit against the exact search
	text         latency
	note         string
	took         time.Duration // the whole size: load, build and searches
	// explainPlanner and explainHNSW are EXPLAIN (COSTS OFF) of one search
	// as the planner runs it and with the HNSW index forced.
	explainPlanner, explainHNSW string
}

// query is one prepared search.
type query struct {
	user, text string
	vec        []float32
}

// measure runs one size in its own database.
func measure(ctx context.Context, o options, n int, deadline time.Time, logger *slog.Logger) (result, error) {
	r := result{items: n, users: o.users}
	dbURL, drop, err := createDB(ctx, o.db)
	if err != nil {
		return r, err
	}
	defer drop()
	store, err := postgres.Open(ctx, dbURL, logger)
	if err != nil {
		return r, err
	}
	defer store.Close()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return r, err
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		logger.Info("postgres notice", "message", n.Message, "detail", n.Detail)
		notices = append(notices, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var indexDef string
	if err := conn.QueryRow(ctx, "SELECT pg_get_indexdef($1::regclass)", hnswIndex).Scan(&indexDef); err != nil {
		return r, fmt.Errorf("read index definition: %w", err)
	}
	if _, err := conn.Exec(ctx, "DROP INDEX "+hnswIndex); err != nil {
		return r, err
	}

	c := newCorpus(o.seed, o.users)
	// Keep two minutes of the budget for the searches.
	if r.load, err = load(ctx, conn, c, n, deadline.Add(-2*time.Minute)); err != nil {
		return r, err
	}
	if r.load.loaded == 0 {
		return result{items: n, users: o.users, note: "not measured: the time budget ran out"}, nil
	}
	if r.load.loaded < n {
		r.items = r.load.loaded
		r.note = fmt.Sprintf("asked for %d items; the time budget allowed loading %d", n, r.load.loaded)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE memory_items"); err != nil {
		return r, err
	}
	logger.Info("loaded", "items", n, "elapsed", r.load.elapsed)

	emb := recall.NewLocal(384)
	qs := make([]query, o.queries)
	for i := range qs {
		qs[i].user, qs[i].text = c.query(i)
		v, _ := emb.Embed(ctx, []string{qs[i].text}, time.Time{})
		qs[i].vec = v[0]
	}
	vectorQ := func(q query) memory.ItemQuery {
		return memory.ItemQuery{Tenant: benchTenant, User: q.user, Embedding: q.vec,
			Model: emb.Model(), Dims: 384, Limit: o.limit}
	}

	// Exact: no HNSW index.
	exactIDs := make([][]int64, len(qs))
	r.exact, err = timeQueries(ctx, qs, func(ctx context.Context, i int, q query) error {
		items, err := store.SQL().SearchVector(ctx, vectorQ(q))
		exactIDs[i] = ids(items)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("exact search: %w", err)
	}
	r.text, err = timeQueries(ctx, qs, func(ctx context.Context, _ int, q query) error {
		_, err := store.SQL().SearchText(ctx, memory.ItemQuery{Tenant: benchTenant, User: q.user, Text: q.text, Limit: o.limit})
		return err
	})
	if err != nil {
		return r, fmt.Errorf("text search: %w", err)
	}

	// Keep a minute for the searches on the index.
	notices = notices[:0]
	r.build, r.built, err = buildIndex(ctx, conn, indexDef, o.buildMem, deadline.Add(-time.Minute))
	if err != nil {
		return r, err
	}
	for _, m := range notices {
		if strings.Contains(m, "maintenance_work_mem") {
			r.note = strings.TrimPrefix(r.note+"; ", "; ") + "HNSW build: " + strings.TrimSuffix(m, ".")
		}
	}
	logger.Info("HNSW build", "items", n, "elapsed", r.build, "finished", r.built)
	if !r.built {
		r.note = strings.TrimPrefix(r.note+"; ", "; ") +
			fmt.Sprintf("HNSW build cancelled after %s to stay within the time budget", r.build.Round(time.Second))
		return r, nil
	}
	if _, err := conn.Exec(ctx, "ANALYZE memory_items"); err != nil {
		return r, err
	}

	// The planner's choice, as SearchVector's statement runs in production
	// for a user too large for the in-process index.
	before, err := indexScans(ctx, conn)
	if err != nil {
		return r, err
	}
	r.planner, err = timeQueries(ctx, qs, func(ctx context.Context, _ int, q query) error {
		_, err := store.SQL().SearchVector(ctx, vectorQ(q))
		return err
	})
	if err != nil {
		return r, fmt.Errorf("planner search: %w", err)
	}
	if r.plannerPlan, err = chosenIndex(ctx, conn, before); err != nil {
		return r, err
	}
	if r.explainPlanner, err = explain(ctx, conn, qs[0], emb.Model(), o.limit, false); err != nil {
		return r, err
	}
	if r.explainHNSW, err = explain(ctx, conn, qs[0], emb.Model(), o.limit, true); err != nil {
		return r, err
	}

	// HNSW forced: without sorts and other scans, only the HNSW index can
	// deliver rows in distance order.
	forced, err := postgres.Open(ctx, withParams(dbURL, map[string]string{
		"enable_sort": "off", "enable_seqscan": "off", "enable_bitmapscan": "off",
	}), logger)
	if err != nil {
		return r, err
	}
	defer forced.Close()
	var hits, total int
	r.hnsw, err = timeQueries(ctx, qs[:min(len(qs), o.hnswQueries)], func(ctx context.Context, i int, q query) error {
		items, err := forced.SQL().SearchVector(ctx, vectorQ(q))
		got := ids(items)
		for _, id := range exactIDs[i] {
			if slices.Contains(got, id) {
				hits++
			}
		}
		total += len(exactIDs[i])
		return err
	})
	if err != nil {
		return r, fmt.Errorf("HNSW search: %w", err)
	}
	if total > 0 {
		r.recall = float64(hits) / float64(total)
	}
	return r, nil
}

// explain returns EXPLAIN (ANALYZE, COSTS OFF) of one vector search shaped
// as postgres.SearchVector runs it (the same predicate, order, limit and
// iterative-scan settings), as the planner chooses or with the HNSW index
// forced.
func explain(ctx context.Context, conn *pgx.Conn, q query, model string, limit int, forceHNSW bool) (string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	sets := []string{
		"SET LOCAL hnsw.iterative_scan = relaxed_order",
		fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", max(40, limit)),
	}
	if forceHNSW {
		sets = append(sets, "SET LOCAL enable_sort = off", "SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off")
	}
	for _, s := range sets {
		if _, err := tx.Exec(ctx, s); err != nil {
			return "", fmt.Errorf("%s: %w", s, err)
		}
	}
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
		SELECT id, embedding::vector(384) <=> $3 AS distance
		FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND dims = 384 AND model = $5
		ORDER BY embedding::vector(384) <=> $3
		LIMIT $4`, benchTenant, q.user, pgvector.NewVector(q.vec), limit, model)
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	// The query vector is 384 numbers; show it as the parameter it is.
	return vectorLiteral.ReplaceAllString(strings.Join(lines, "\n"), "$$3"), nil
}

// vectorLiteral matches a vector constant in EXPLAIN output.
var vectorLiteral = regexp.MustCompile(`'\[[^\]]*\]'::vector`)

// ids lists the items' IDs.
func ids(items []memory.Item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// timeQueries runs every query once to warm caches, then again timing each.
func timeQueries(ctx context.Context, qs []query, fn func(ctx context.Context, i int, q query) error) (latency, error) {
	for i, q := range qs {
		if err := fn(ctx, i, q); err != nil {
			return latency{}, err
		}
	}
	ds := make([]time.Duration, len(qs))
	for i, q := range qs {
		start := time.Now()
		if err := fn(ctx, i, q); err != nil {
			return latency{}, err
		}
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	pct := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return latency{p50: pct(0.50), p99: pct(0.99), n: len(ds)}, nil
}

// indexScans reads the scan counters of the memory_items indexes.
func indexScans(ctx context.Context, conn *pgx.Conn) (map[string]int64, error) {
	rows, err := conn.Query(ctx, `SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = 'memory_items'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		m[name] = n
	}
	return m, rows.Err()
}

// chosenIndex names the index whose scan counter grew most since before.
// Other sessions' statistics reach the counters within about a second, so
// it waits up to five for them.
func chosenIndex(ctx context.Context, conn *pgx.Conn, before map[string]int64) (string, error) {
	wait := time.NewTimer(5 * time.Second)
	defer wait.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		after, err := indexScans(ctx, conn)
		if err != nil {
			return "", err
		}
		best, most := "", int64(0)
		for name, n := range after {
			if d := n - before[name]; d > most {
				best, most = name, d
			}
		}
		if best != "" {
			return best, nil
		}
		select {
		case <-tick.C:
		case <-wait.C:
			return "unknown (no index scans counted)", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
