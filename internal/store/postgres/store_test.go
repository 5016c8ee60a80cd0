package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
	migrations "github.com/memgate/memgate/migrations/postgres"
)

var _ storetest.Store = (*Store)(nil)

// testCtx is bounded and cancelled when the test ends.
func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// mustOpen opens a store on a fresh database, closed when the test ends.
func mustOpen(tb testing.TB) *Store {
	tb.Helper()
	return mustOpenURL(tb, testenv.PostgresURL(tb))
}

func mustOpenURL(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(testCtx(tb), url, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

var _ storetest.KnowledgeStore = (*Store)(nil)

func TestKnowledgeContract(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore { return mustOpen(t) })
}

func TestErasureContract(t *testing.T) {
	storetest.RunErasure(t, func(t *testing.T) storetest.KnowledgeStore { return mustOpen(t) })
}

func TestStoreContract(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) storetest.Store { return mustOpen(t) })
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	url := testenv.PostgresURL(t)
	const replicas = 6
	stores := make([]*Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(testCtx(t), url, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: Open: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	ms, err := contract.Migrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	var rows, distinct int
	if err := stores[0].pool.QueryRow(testCtx(t),
		"SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || distinct != len(ms) {
		t.Fatalf("schema_migrations has %d rows (%d distinct) after %d concurrent Opens, want %d", rows, distinct, replicas, len(ms))
	}
	// Open again: nothing left to apply, no error.
	again, err := Open(testCtx(t), url, nil)
	if err != nil {
		t.Fatalf("Open on an up-to-date database: %v", err)
	}
	again.Close()
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", nil)
	if !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want memory.ErrUnavailable", err)
	}
}

func TestSchemaIndexesLedByTenant(t *testing.T) {
	s := mustOpen(t)
	rows, err := s.pool.Query(testCtx(t), `
		SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
		WHERE c.relnamespace = 'public'::regnamespace AND c.relname <> 'schema_migrations'`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var d [2]string
		return d, r.Scan(&d[0], &d[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) < 10 {
		t.Fatalf("only %d indexes found", len(defs))
	}
	for _, d := range defs {
		name, def := d[0], d[1]
		if name == "memory_items_embedding_384" || name == "memory_items_embedding_512" {
			continue // pgvector indexes one expression; queries filter by tenant alongside
		}
		if name == "index_backlog_pkey" {
			continue // a work queue, read oldest first across tenants (it holds no text)
		}
		if name == "user_tombstones_pkey" || name == "conversation_tombstones_pkey" || name == "conversation_tombstones_unstored" {
			continue // led by a digest of the tenant and the ids (migration 0027), which hold no id in the clear, or by the expiry of unstored ones across tenants (0030)
		}
		if name == "queue_purges_pkey" {
			continue // led by a tombstone digest (migration 0033), read across tenants oldest first
		}
		if strings.HasPrefix(name, "held_responses_") {
			continue // led by digests of the tenant and ids (migration 0036), or by expiry across tenants
		}
		if strings.HasPrefix(name, "provider_states_") {
			continue // led by digests of the state and of the tenant and user (migration 0029), or by expiry across tenants
		}
		_, cols, _ := strings.Cut(def, "(")
		if !strings.HasPrefix(cols, "tenant") {
			t.Errorf("index %s is not led by tenant: %s", name, def)
		}
	}
}

func TestHNSWIndexUsableForTenantScopedSearch(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	const dims = 384
	vec := func(seed int) pgvector.Vector {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32((seed*31+i*17)%97) / 97
		}
		return pgvector.NewVector(v)
	}
	b := &pgx.Batch{}
	for i := range 300 {
		b.Queue(`INSERT INTO memory_items (tenant, user_id, kind, source, content, embedding, dims, model)
			VALUES ($1, $2, 'message', $3, $4, $5, $6, 'local')`,
			fmt.Sprintf("t%d", i%3), fmt.Sprintf("u%d", i%5), fmt.Sprintf("k%d", i), fmt.Sprintf("text %d", i), vec(i), dims)
	}
	// An item of another dimension lives in the same column, outside the index.
	b.Queue(`INSERT INTO memory_items (tenant, user_id, kind, source, content, embedding, dims, model)
		VALUES ('t0', 'u0', 'message', 'small', 'small', '[1,2,3]', 3, 'tiny')`)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("insert items: %v", err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE memory_items"); err != nil {
		t.Fatal(err)
	}

	const search = `SELECT id, content FROM memory_items
		WHERE tenant = $1 AND user_id = $2 AND dims = 384
		ORDER BY embedding::vector(384) <=> $3 LIMIT 5`
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A table this small is cheaper to scan and sort; forbid that to see
	// whether the planner can use the HNSW index for the tenant-scoped query
	// at all (the recall benchmarks measure when it chooses to).
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET ALL")
	rows, err := conn.Query(ctx, "EXPLAIN "+search, "t1", "u1", vec(7))
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	plan = regexp.MustCompile(`'\[[^']*\]'`).ReplaceAllString(plan, "'[...]'")
	if !strings.Contains(plan, "memory_items_embedding_384") {
		t.Fatalf("search plan does not use the HNSW index:\n%s", plan)
	}
	if !strings.Contains(plan, "tenant") || !strings.Contains(plan, "user_id") {
		t.Fatalf("search plan does not filter by tenant and user inside the query:\n%s", plan)
	}

	// And the query runs, returning only the caller's items.
	rows, err = conn.Query(ctx, search, "t1", "u1", vec(7))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id int64
		var content string
		return content, r.Scan(&id, &content)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("search returned nothing")
	}
	for _, c := range got {
		var n int
		fmt.Sscanf(c, "text %d", &n)
		if n%3 != 1 || n%5 != 1 {
			t.Fatalf("search for t1/u1 returned %q, which belongs to t%d/u%d", c, n%3, n%5)
		}
	}
}

func TestRawKeptVerbatim(t *testing.T) {
	s := mustOpen(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "raw"}
	raw := `{"role":"user",  "content":"hi", "a":1}`
	turn, err := memory.ParseMessage([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	reply := memory.Message{Role: "assistant", Content: "no raw given"}
	if _, err := s.SaveExchange(testCtx(t), memory.Exchange{ID: "x", Identity: id, Turn: []memory.Message{turn}, Reply: reply, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Recent(testCtx(t), id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || string(msgs[0].Raw) != raw || msgs[1].Raw != nil {
		t.Fatalf("Raw round trip = %q, %q; want %q verbatim and nil", msgs[0].Raw, msgs[1].Raw, raw)
	}
}

func TestSaveExchangeRejectsBadInput(t *testing.T) {
	s := mustOpen(t)
	ok := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c"}
	reply := memory.Message{Role: "assistant", Content: "a"}
	tests := []struct {
		name string
		ex   memory.Exchange
	}{
		{"no exchange id", memory.Exchange{Identity: ok, Reply: reply}},
		{"bad user id", memory.Exchange{ID: "x", Identity: memory.Identity{Tenant: "acme", User: "a/b", Conversation: "c"}, Reply: reply}},
		{"empty tenant", memory.Exchange{ID: "x", Identity: memory.Identity{User: "a", Conversation: "c"}, Reply: reply}},
		{"no reply", memory.Exchange{ID: "x", Identity: ok}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.SaveExchange(testCtx(t), tt.ex); !errors.Is(err, memory.ErrInvalid) {
				t.Fatalf("SaveExchange = %v, want memory.ErrInvalid", err)
			}
		})
	}
	if cs, err := s.Conversations(testCtx(t), "acme", "alice"); err != nil || len(cs) != 0 {
		t.Fatalf("Conversations after rejected saves = %+v, %v; want none", cs, err)
	}
}

func TestDeleteUserRacesWithSaves(t *testing.T) {
	// Captures that happened before an erasure must never survive it, even
	// when they commit concurrently with it.
	s := mustOpen(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c"}
	before := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex := memory.Exchange{ID: fmt.Sprintf("ex-%d", i), Identity: id, At: before,
				Turn: []memory.Message{{Role: "user", Content: "q"}}, Reply: memory.Message{Role: "assistant", Content: "a"}}
			if _, err := s.SaveExchange(testCtx(t), ex); err != nil {
				errs <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.DeleteUser(testCtx(t), "acme", "alice"); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var n int
	if err := s.pool.QueryRow(testCtx(t), "SELECT count(*) FROM messages WHERE tenant = 'acme' AND user_id = 'alice'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d messages captured before the erasure survived it", n)
	}
}

// TestCancelledQueryKeepsItsConnection: a query whose caller gave up (a
// request past memory.load_timeout) finishes on its connection, which goes
// back to the pool instead of being closed and replaced.
func TestCancelledQueryKeepsItsConnection(t *testing.T) {
	s := mustOpen(t)
	opened := s.pool.Stat().NewConnsCount() // by Open (its chat lock check)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		var v any
		_ = s.pool.QueryRow(ctx, "SELECT pg_sleep(0.1)").Scan(&v)
		cancel()
	}
	if err := s.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := s.pool.Stat().NewConnsCount() - opened; n != 0 {
		t.Fatalf("opened %d connections for queries run one after another, want none: the pool's were reused", n)
	}
}

var _ storetest.AdoptStore = (*Store)(nil)

func TestAdoptContract(t *testing.T) {
	storetest.RunAdopt(t, func(t *testing.T) storetest.AdoptStore { return mustOpen(t) })
}
