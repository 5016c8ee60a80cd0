package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

// mustConn opens a plain connection to url (neither store's), closed when
// the test ends.
func mustConn(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	c, err := pgx.Connect(testCtx(tb), url)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestFreshnessContract runs the freshness suite on two Stores sharing one
// database, as two gateways do.
func TestFreshnessContract(t *testing.T) {
	storetest.RunFreshness(t, func(t *testing.T) storetest.Replicas {
		url := testenv.PostgresURL(t)
		conn := mustConn(t, url)
		return storetest.Replicas{Mine: storetest.Cached(mustOpenURL(t, url)), Other: mustOpenURL(t, url),
			Exec: func(ctx context.Context, sql string) error {
				_, err := conn.Exec(ctx, sql)
				return err
			}}
	})
}

// bothSearches runs q through s's SearchVector and SearchText and returns
// the refs each found, sorted.
func bothSearches(t *testing.T, s *Store, q memory.ItemQuery) [2][]string {
	t.Helper()
	var out [2][]string
	for i, search := range []func(context.Context, memory.ItemQuery) ([]memory.Item, error){s.SearchVector, s.SearchText} {
		items, err := search(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			out[i] = append(out[i], it.Ref)
		}
		slices.Sort(out[i])
	}
	return out
}

// revisions reads the user's counters (zero when no row): added, the
// count every change moves (changed + dated: Revisions.Items), both with
// what the user's tombstone carries (ItemRevisions), and max_id.
func revisions(t *testing.T, s *Store, user string) [3]int64 {
	t.Helper()
	rev, err := s.ItemRevisions(testCtx(t), "acme", user)
	if err != nil {
		t.Fatal(err)
	}
	r := [3]int64{rev.Added, rev.Changed + rev.Dated}
	err = s.pool.QueryRow(testCtx(t), `SELECT max_id FROM memory_item_revisions
		WHERE tenant = 'acme' AND user_id = $1`, user).Scan(&r[2])
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return r
}

// TestItemRevisionsFollowWrites checks the counters of migrations 0010
// and 0023: inserts move added, deletes and updates of what a search reads
// move changed or (the time said alone) dated, a write that changes nothing searched moves nothing, and an
// erasure moves changed and carries the counters into the user's
// tombstone, so no counter ever goes back (max_id, which orders one
// user's racing inserts, starts again with the user's row).
func TestItemRevisionsFollowWrites(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	item := func(ref, text string, v ...float32) memory.Item {
		return memory.Item{Tenant: "acme", User: "alice", Conversation: "c1", Kind: "message", Ref: ref, Text: text,
			Embedding: v, Model: "m", Dims: len(v)}
	}
	var last [3]int64
	step := func(name string, addedBy int64, changes bool) {
		t.Helper()
		r := revisions(t, s, "alice")
		switch {
		case r[0] != last[0]+addedBy:
			t.Fatalf("%s: added %d, want %d", name, r[0], last[0]+addedBy)
		case changes && r[1] <= last[1]:
			t.Fatalf("%s: changed stayed at %d", name, r[1])
		case !changes && r[1] != last[1]:
			t.Fatalf("%s: changed moved from %d to %d", name, last[1], r[1])
		case r[2] < last[2] && name != "erasure":
			t.Fatalf("%s: max_id went back from %d to %d", name, last[2], r[2])
		}
		last = r
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AddItems(ctx, []memory.Item{item("a", "porto", 1, 0), item("b", "lisbon", 0, 1)}))
	step("insert", 2, false)
	must(s.AddItems(ctx, []memory.Item{item("a", "porto", 1, 0)}))
	step("upsert of the same item", 0, false)
	must(s.AddItems(ctx, []memory.Item{item("a", "porto again", 1, 0)}))
	step("new text", 0, true)
	exec(`UPDATE memory_items SET from_seq = 7 WHERE source = 'a'`)
	step("a column no search reads", 0, false)
	for _, set := range []string{"conversation = 'c2'", "said_at = now()", "embedding = '[1,1]'",
		"model = 'm2'", "source = 'z'", "kind = 'summary'", "chunk = 3", "created_at = now() - interval '1 day'"} {
		exec(`UPDATE memory_items SET ` + set + ` WHERE tenant = 'acme' AND user_id = 'alice' AND source IN ('b', 'z')`)
		step(set, 0, true)
	}
	exec(`UPDATE memory_items SET content = content WHERE user_id = 'alice'`)
	step("a rewrite of the same row", 0, false)
	exec(`DELETE FROM memory_items WHERE source = 'a'`)
	step("delete", 0, true)
	must(s.DeleteUser(ctx, "acme", "alice"))
	step("erasure", 0, true)
	must(s.AddItems(ctx, []memory.Item{item("n1", "porto", 1, 0), item("n2", "lisbon", 0, 1)}))
	step("insert after the erasure", 2, false)
	// Moving an item to another user counts for both.
	bob := revisions(t, s, "bob")
	exec(`UPDATE memory_items SET user_id = 'bob' WHERE source = 'n1'`)
	step("moved away", 0, true)
	if r := revisions(t, s, "bob"); r[1] <= bob[1] {
		t.Fatalf("moved to bob: bob's changed stayed at %d", r[1])
	}
}

// TestSearchSeesInsertCommittedOutOfIDOrder commits an item whose id was
// taken before another item's that a search already found (two writers
// racing): the next search finds it too, though it is below the highest id
// held in memory.
func TestSearchSeesInsertCommittedOutOfIDOrder(t *testing.T) {
	url := testenv.PostgresURL(t)
	s := mustOpenURL(t, url)
	conn := mustConn(t, url)
	ctx := testCtx(t)
	item := func(ref string) memory.Item {
		return memory.Item{Tenant: "acme", User: "alice", Conversation: "c1", Kind: "message", Ref: ref,
			Text: "porto " + ref, Embedding: []float32{1, 0}, Model: "m", Dims: 2}
	}
	want := func(step string, refs ...string) {
		t.Helper()
		q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Dims: 2, Text: "porto", Limit: 10}
		for _, got := range bothSearches(t, s, q) {
			if !slices.Equal(got, refs) {
				t.Fatalf("%s: found %v, want %v", step, got, refs)
			}
		}
	}
	if err := s.AddItems(ctx, []memory.Item{item("a")}); err != nil {
		t.Fatal(err)
	}
	want("first", "a")
	var early int64
	if err := conn.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('memory_items', 'id'))`).Scan(&early); err != nil {
		t.Fatal(err)
	}
	if err := s.AddItems(ctx, []memory.Item{item("c")}); err != nil {
		t.Fatal(err)
	}
	want("a later id committed first", "a", "c")
	if _, err := conn.Exec(ctx, `INSERT INTO memory_items (id, tenant, user_id, conversation, kind, source, content, embedding, dims, model)
		OVERRIDING SYSTEM VALUE VALUES ($1, 'acme', 'alice', 'c1', 'message', 'b', 'porto b', '[1,0]', 2, 'm')`, early); err != nil {
		t.Fatal(err)
	}
	want("the earlier id committed last", "a", "b", "c")
}

// TestSearchesRaceWrites searches two Stores while another writes and
// deletes the user's items, then checks both end at the final state. Run
// it with -race.
func TestSearchesRaceWrites(t *testing.T) {
	url := testenv.PostgresURL(t)
	stores := []*Store{mustOpenURL(t, url), mustOpenURL(t, url)}
	writer := mustOpenURL(t, url)
	ctx := testCtx(t)
	item := func(i int) memory.Item {
		return memory.Item{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("c%d", i%3), Kind: "message",
			Ref: fmt.Sprintf("r%03d", i), Text: fmt.Sprintf("porto note %d", i),
			Embedding: []float32{1, float32(i % 7), 0, 0}, Model: "m", Dims: 4}
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0, 0, 0}, Model: "m", Dims: 4, Text: "porto", Limit: 200}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for _, s := range stores {
		for _, search := range []func(context.Context, memory.ItemQuery) ([]memory.Item, error){s.SearchVector, s.SearchText} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					if _, err := search(ctx, q); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	for i := range 60 {
		if err := writer.AddItems(ctx, []memory.Item{item(i)}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if _, err := writer.pool.Exec(ctx, `DELETE FROM memory_items WHERE source = $1`, fmt.Sprintf("r%03d", i-5)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("search: %v", err)
	}
	var want []string
	for i := range 60 {
		if i%10 != 4 {
			want = append(want, fmt.Sprintf("r%03d", i))
		}
	}
	for n, s := range stores {
		for _, got := range bothSearches(t, s, q) {
			if !slices.Equal(got, want) {
				t.Fatalf("store %d after the writes: %d items %v, want %d %v", n, len(got), got, len(want), want)
			}
		}
	}
}

// TestSaveTailsContract checks the saves report the count before them
// (memory.SaveResult.TailKnown), on the one-statement path of a turn
// and the group commit's.
func TestSaveTailsContract(t *testing.T) {
	storetest.RunSaveTails(t, func(t *testing.T) storetest.Revisioned { return mustOpen(t) })
}
