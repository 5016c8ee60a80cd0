package postgres

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// bm25Recomputed pairs each statistics table with a query recomputing it
// from scratch from memory_items: per (tenant, user) the item count and total
// length, per term its document frequency, per (term, item) the term's
// frequency and the item's length, as migration 0003 defines them.
var bm25Recomputed = []struct{ table, stored, recomputed string }{
	{"memory_item_stats",
		`SELECT tenant, user_id, docs, total_len FROM memory_item_stats`,
		`SELECT tenant, user_id, count(*), sum(len) FROM (
			SELECT tenant, user_id, (SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)
			                         FROM unnest(tsv) u) AS len
			FROM memory_items) i
		GROUP BY tenant, user_id`},
	{"memory_term_df",
		`SELECT tenant, user_id, term, df FROM memory_term_df`,
		`SELECT tenant, user_id, t.lexeme, count(*) FROM memory_items CROSS JOIN LATERAL unnest(tsv) t
		GROUP BY tenant, user_id, t.lexeme`},
	{"memory_item_terms",
		`SELECT tenant, user_id, term, item_id, tf, len FROM memory_item_terms`,
		`SELECT tenant, user_id, t.lexeme, id, coalesce(cardinality(t.positions), 1),
			(SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0) FROM unnest(tsv) u)
		FROM memory_items CROSS JOIN LATERAL unnest(tsv) t`},
}

// mustMatchRecomputedBM25 fails the test unless every statistics row equals
// its recomputation from memory_items (and there are no others), and
// returns how many rows memory_item_terms holds.
func mustMatchRecomputedBM25(tb testing.TB, s *Store) int {
	tb.Helper()
	for _, q := range bm25Recomputed {
		var missing, extra int
		err := s.pool.QueryRow(testCtx(tb), fmt.Sprintf(`SELECT
			(SELECT count(*) FROM (%[2]s EXCEPT ALL %[1]s) d),
			(SELECT count(*) FROM (%[1]s EXCEPT ALL %[2]s) d)`, q.stored, q.recomputed)).Scan(&missing, &extra)
		if err != nil {
			tb.Fatalf("%s: %v", q.table, err)
		}
		if missing != 0 || extra != 0 {
			tb.Errorf("%s: %d rows missing and %d wrong or extra against a recomputation", q.table, missing, extra)
		}
	}
	var postings int
	if err := s.pool.QueryRow(testCtx(tb), "SELECT count(*) FROM memory_item_terms").Scan(&postings); err != nil {
		tb.Fatal(err)
	}
	return postings
}

// bm25Text is a text of n words drawn from a small vocabulary, so that
// items share terms and some words repeat within an item.
func bm25Text(r *rand.Rand, n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", r.IntN(60))
	}
	return strings.Join(words, " ")
}

// TestBM25StatisticsFollowBulkWrites: after bulk inserts, updates and
// deletes, through the store and in plain SQL, every BM25 statistics row
// equals its recomputation from memory_items. Each step has its own
// deadline (testCtx), so a slow machine slows the test without failing it.
func TestBM25StatisticsFollowBulkWrites(t *testing.T) {
	s := mustOpen(t)
	r := rand.New(rand.NewPCG(7, 8))
	item := func(tenant, user string, i int) memory.Item {
		return memory.Item{Tenant: tenant, User: user, Conversation: fmt.Sprintf("c%d", i%4), Kind: "message",
			Ref: fmt.Sprintf("k%d", i), Text: bm25Text(r, 3+r.IntN(25))}
	}

	// One batch: three users of two tenants, interleaved.
	var items []memory.Item
	for i := range 400 {
		items = append(items, item("t0", "alice", i), item("t0", "bob", i), item("t1", "alice", i))
	}
	if err := s.AddItems(testCtx(t), items); err != nil {
		t.Fatalf("AddItems: %v", err)
	}
	if n := mustMatchRecomputedBM25(t, s); n == 0 {
		t.Fatal("no postings after a bulk insert")
	}

	// Changed texts, unchanged ones, and one key three times in one batch
	// (the last text wins).
	var updates []memory.Item
	for i := 0; i < 400; i += 3 {
		updates = append(updates, item("t0", "alice", i), items[3*i+1])
	}
	last := item("t1", "alice", 5)
	updates = append(updates, item("t1", "alice", 5), item("t1", "alice", 5), last)
	if err := s.AddItems(testCtx(t), updates); err != nil {
		t.Fatalf("AddItems (updates): %v", err)
	}
	mustMatchRecomputedBM25(t, s)
	var got string
	if err := s.pool.QueryRow(testCtx(t), `SELECT content FROM memory_items WHERE tenant = 't1' AND user_id = 'alice' AND source = 'k5'`).Scan(&got); err != nil || got != last.Text {
		t.Fatalf("repeated key stored %q (%v), want the last text %q", got, err, last.Text)
	}

	// Multi-row updates and deletes written directly, as a migration or an
	// operator would: texts changed, a term removed from every item of a
	// user, whole conversations deleted.
	for _, sql := range []string{
		`UPDATE memory_items SET content = content || ' extra w1' WHERE user_id = 'bob' AND source LIKE 'k1%'`,
		`UPDATE memory_items SET content = replace(content, 'w7', 'w70') WHERE tenant = 't0' AND user_id = 'alice'`,
		`UPDATE memory_items SET said_at = now() WHERE tenant = 't1'`, // no text change
		`DELETE FROM memory_items WHERE tenant = 't0' AND user_id = 'bob' AND source LIKE 'k2%'`,
	} {
		if _, err := s.pool.Exec(testCtx(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		mustMatchRecomputedBM25(t, s)
	}
	// A conversation's items go in one statement, as DeleteConversation
	// deletes them.
	if _, err := s.pool.Exec(testCtx(t), `DELETE FROM memory_items WHERE tenant = 't1' AND user_id = 'alice' AND conversation = 'c1'`); err != nil {
		t.Fatal(err)
	}
	mustMatchRecomputedBM25(t, s)

	// Erasure leaves no statistics of the user, and the others' intact.
	if err := s.DeleteUser(testCtx(t), "t0", "bob"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	mustMatchRecomputedBM25(t, s)
	for _, table := range []string{"memory_item_stats", "memory_term_df", "memory_item_terms"} {
		var n int
		if err := s.pool.QueryRow(testCtx(t), "SELECT count(*) FROM "+table+" WHERE tenant = 't0' AND user_id = 'bob'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s holds %d rows of the erased user", table, n)
		}
	}

	// Deleting every remaining item leaves no statistics at all.
	if _, err := s.pool.Exec(testCtx(t), "DELETE FROM memory_items"); err != nil {
		t.Fatal(err)
	}
	if n := mustMatchRecomputedBM25(t, s); n != 0 {
		t.Fatalf("%d postings left with no items", n)
	}
}

// TestBM25StatisticsConcurrentWriters has writers of the same users, each
// batch naming them in a different order and sharing the vocabulary (so
// the same user totals and document frequencies), insert, update and
// delete at once: none may deadlock or fail, and no count may be lost.
// Each writer has items of its own (one item written by two transactions
// at once is memory_items' concern, not the statistics').
func TestBM25StatisticsConcurrentWriters(t *testing.T) {
	s := mustOpen(t)
	const writers, rounds, perRound = 4, 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			users := []string{"u1", "u2", "u3"}
			for round := range rounds {
				r.Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })
				var items []memory.Item
				for i := range perRound {
					items = append(items, memory.Item{Tenant: "t", User: users[i%len(users)], Kind: "message",
						// Some are updates of the writer's earlier items.
						Ref: fmt.Sprintf("w%d-k%d", w, r.IntN(rounds*perRound/2)), Text: bm25Text(r, 3+r.IntN(20))})
				}
				if err := s.AddItems(testCtx(t), items); err != nil {
					errs <- fmt.Errorf("writer %d round %d: AddItems: %w", w, round, err)
					return
				}
				if _, err := s.pool.Exec(testCtx(t), `DELETE FROM memory_items WHERE tenant = 't' AND source LIKE $1`,
					fmt.Sprintf("w%d-k%d%%", w, r.IntN(10))); err != nil {
					errs <- fmt.Errorf("writer %d round %d: delete: %w", w, round, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := mustMatchRecomputedBM25(t, s); n == 0 {
		t.Fatal("no postings after the writers")
	}
}
