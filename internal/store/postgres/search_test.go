package postgres

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// randomVector returns a unit vector of dims dimensions drawn from r.
func randomVector(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	var n float64
	for i := range v {
		x := r.NormFloat64()
		v[i] = float32(x)
		n += x * x
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return v
}

// mustAddVectors stores perUser 384-dimension items for each of users users
// in tenants t0 and t1, in conversations c0..c2, and analyzes the table.
func mustAddVectors(tb testing.TB, s *Store, users, perUser int) {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var items []memory.Item
	for _, tenant := range []string{"t0", "t1"} {
		for u := range users {
			for i := range perUser {
				items = append(items, memory.Item{
					Tenant: tenant, User: fmt.Sprintf("u%d", u), Conversation: fmt.Sprintf("c%d", i%3),
					Kind: "message", Ref: fmt.Sprintf("k%d", i), Text: fmt.Sprintf("text %d", i),
					Embedding: randomVector(r, 384), Model: "local", Dims: 384,
				})
			}
		}
	}
	for len(items) > 0 {
		n := min(len(items), 500)
		if err := s.AddItems(testCtx(tb), items[:n]); err != nil {
			tb.Fatalf("AddItems: %v", err)
		}
		items = items[n:]
	}
	if _, err := s.pool.Exec(testCtx(tb), "ANALYZE memory_items"); err != nil {
		tb.Fatal(err)
	}
}

// mustForceIndexes makes every new session of the store's database avoid
// sequential scans, bitmap scans and sorts — what the planner does on a big
// table — and returns a store whose pool sees that setting.
func mustForceIndexes(tb testing.TB, url string) *Store {
	tb.Helper()
	s := mustOpenURL(tb, url)
	if _, err := s.pool.Exec(testCtx(tb), `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET enable_seqscan = off', current_database());
		EXECUTE format('ALTER DATABASE %I SET enable_bitmapscan = off', current_database());
		EXECUTE format('ALTER DATABASE %I SET enable_sort = off', current_database());
	END $$`); err != nil {
		tb.Fatal(err)
	}
	return mustOpenURL(tb, url)
}

// TestSearchVectorSQLUsesHNSW explains the statement SearchVector runs: for
// 384 dimensions it scans the partial HNSW index, with the tenant, user and
// every optional filter applied by that scan, not after the query.
func TestSearchVectorSQLUsesHNSW(t *testing.T) {
	url := testenv.PostgresURL(t)
	mustAddVectors(t, mustOpenURL(t, url), 10, 30)
	s := mustForceIndexes(t, url)
	r := rand.New(rand.NewPCG(3, 4))

	tests := []struct {
		name string
		q    memory.ItemQuery
		want []string // filter terms the index scan must apply
	}{
		{"tenant and user", memory.ItemQuery{Tenant: "t1", User: "u3", Limit: 5},
			[]string{"tenant", "user_id"}},
		{"all filters", memory.ItemQuery{Tenant: "t1", User: "u3", Model: "local", Conversation: "c1",
			ExcludeRefs: []string{"k1", "k4"}, Limit: 5},
			[]string{"tenant", "user_id", "model", "conversation", "source"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.Embedding, tt.q.Dims = randomVector(r, 384), 384
			sql, args := searchVectorSQL(tt.q, 384)
			rows, err := s.pool.Query(testCtx(t), "EXPLAIN "+sql, args...)
			if err != nil {
				t.Fatalf("EXPLAIN: %v", err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := regexp.MustCompile(`'\[[^']*\]'`).ReplaceAllString(strings.Join(lines, "\n"), "'[...]'")
			// The scan node and the lines under it (Order By, Filter) up to
			// the next node.
			_, scan, ok := strings.Cut(plan, "Index Scan using memory_items_embedding_384")
			if !ok {
				t.Fatalf("SearchVector's plan does not scan the HNSW index:\n%s", plan)
			}
			if i := strings.Index(scan, "->"); i >= 0 {
				scan = scan[:i]
			}
			_, filter, ok := strings.Cut(scan, "Filter:")
			if !ok {
				t.Fatalf("the HNSW scan applies no filter:\n%s", plan)
			}
			for _, col := range tt.want {
				if !strings.Contains(filter, col) {
					t.Errorf("the HNSW scan's filter lacks %s:\n%s", col, plan)
				}
			}
		})
	}
}

// TestSearchVectorIterativeScanFillsLimit searches in SQL (the path of a
// user too large for the in-memory index), through the HNSW index,
// for a user who owns 1 in 40 of the vectors: a plain HNSW scan would find
// only a handful of theirs among its ef_search candidates; the iterative scan
// keeps going until the limit is filled, with the user's items only, best
// first, and the same best match as an exact search.
func TestSearchVectorIterativeScanFillsLimit(t *testing.T) {
	url := testenv.PostgresURL(t)
	mustAddVectors(t, mustOpenURL(t, url), 20, 60)
	s := mustForceIndexes(t, url)
	r := rand.New(rand.NewPCG(5, 6))
	const limit = 40
	for trial := range 3 {
		q := memory.ItemQuery{Tenant: "t0", User: fmt.Sprintf("u%d", trial), Model: "local", Dims: 384,
			Embedding: randomVector(r, 384), Limit: limit}
		got, err := s.searchVectorSQLPath(testCtx(t), q)
		if err != nil {
			t.Fatalf("searchVectorSQLPath: %v", err)
		}
		if len(got) != limit {
			t.Fatalf("SearchVector for %s returned %d items, want the limit %d", q.User, len(got), limit)
		}
		for i, it := range got {
			if it.Tenant != q.Tenant || it.User != q.User || it.Dims != 384 || it.Model != "local" {
				t.Fatalf("item %d belongs to %s/%s (%s, %d dims)", i, it.Tenant, it.User, it.Model, it.Dims)
			}
			if i > 0 && it.Score > got[i-1].Score {
				t.Fatalf("item %d scores %v above item %d's %v", i, it.Score, i-1, got[i-1].Score)
			}
		}
		var bestRef string
		var bestScore float64
		if err := s.pool.QueryRow(testCtx(t), `SELECT source, 1 - (embedding <=> $3) FROM memory_items
			WHERE tenant = $1 AND user_id = $2 ORDER BY embedding <=> $3 LIMIT 1`,
			q.Tenant, q.User, vectorArg(q.Embedding)).Scan(&bestRef, &bestScore); err != nil {
			t.Fatal(err)
		}
		if got[0].Ref != bestRef || math.Abs(got[0].Score-bestScore) > 1e-5 {
			t.Fatalf("best match = %s (%v), exact search says %s (%v)", got[0].Ref, got[0].Score, bestRef, bestScore)
		}
	}
}

// TestSearchTextReadsPostings explains SearchText's statement: the
// postings are read by their primary key (tenant, user and term), so no
// other user's rows are ever ranked, and memory_items is read only for the
// best rows.
func TestSearchTextReadsPostings(t *testing.T) {
	url := testenv.PostgresURL(t)
	mustAddVectors(t, mustOpenURL(t, url), 5, 20)
	s := mustForceIndexes(t, url)
	q := memory.ItemQuery{Tenant: "t0", User: "u1", Text: "text 7", Limit: 5}
	sql, args := searchTextSQL(q, memory.QueryStopwords(q.Text))
	rows, err := s.pool.Query(testCtx(t), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !regexp.MustCompile(`Index (Only )?Scan using memory_item_terms_pkey`).MatchString(plan) {
		t.Errorf("postings not read by their key:\n%s", plan)
	}
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("sequential scan:\n%s", plan)
	}
}

// TestSQLSearchesMatchTheIndex checks SQL(), the statements bench/search
// measures, finds what the in-process index finds for a user small enough
// to keep: the same best vector, and text hits of the user only.
func TestSQLSearchesMatchTheIndex(t *testing.T) {
	url := testenv.PostgresURL(t)
	s := mustOpenURL(t, url)
	mustAddVectors(t, s, 3, 30)
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 3 {
		q := memory.ItemQuery{Tenant: "t1", User: fmt.Sprintf("u%d", trial), Model: "local", Dims: 384,
			Embedding: randomVector(r, 384), Text: "text 7", Limit: 5}
		mem, err := s.SearchVector(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		sql, err := s.SQL().SearchVector(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(mem) != 5 || len(sql) != 5 || mem[0].Ref != sql[0].Ref || math.Abs(mem[0].Score-sql[0].Score) > 1e-5 {
			t.Fatalf("%s: index found %v, SQL %v", q.User, refsOf(mem), refsOf(sql))
		}
		text, err := s.SQL().SearchText(testCtx(t), q)
		if err != nil || len(text) == 0 {
			t.Fatalf("%s: SQL text search: %v, %v", q.User, text, err)
		}
		for _, it := range text {
			if it.Tenant != q.Tenant || it.User != q.User {
				t.Fatalf("%s: text hit of %s/%s", q.User, it.Tenant, it.User)
			}
		}
	}
}

// refsOf lists items' refs.
func refsOf(items []memory.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Ref
	}
	return out
}

// TestCacheLimitsBoundTheIndex sets caches too small to keep any user
// (SetCacheLimits, as memory.cache configures them): the searches then go
// to SQL and find what SQL() finds, and the cache stays within its bound.
func TestCacheLimitsBoundTheIndex(t *testing.T) {
	s := mustOpenURL(t, testenv.PostgresURL(t))
	s.SetCacheLimits(itemindex.Limits{Vectors: 1024, Texts: 1024, Items: 1 << 20, Windows: 1 << 20})
	mustAddVectors(t, s, 2, 30)
	r := rand.New(rand.NewPCG(9, 10))
	q := memory.ItemQuery{Tenant: "t1", User: "u1", Model: "local", Dims: 384,
		Embedding: randomVector(r, 384), Text: "text 7", Limit: 5}
	got, err := s.SearchVector(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.SQL().SearchVector(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(refsOf(got), refsOf(want)) {
		t.Fatalf("SearchVector found %v, SQL %v", refsOf(got), refsOf(want))
	}
	if _, bytes := s.index.VectorUsage(); bytes > 1024 {
		t.Fatalf("vector cache holds %d bytes past its 1 KiB bound", bytes)
	}
}
