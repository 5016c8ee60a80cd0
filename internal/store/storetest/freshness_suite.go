package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Replicas are two stores on one database, as two gateway processes
// sharing it hold them, and a third connection to it.
type Replicas struct {
	// Mine and Other are the two stores: reads go through Mine, which
	// keeps what it read in memory (a store read through Cached, as the
	// gateway reads it), and writes through either.
	Mine, Other KnowledgeStore
	// Exec runs one SQL statement on a connection of neither store.
	Exec func(ctx context.Context, sql string) error
}

// RunFreshness runs the freshness suite: whatever is kept in memory to
// search (vectors, full-text index, whole items) or to recall around (the
// turns around a message), or by the engine (Mine read through Cached) to
// answer Recent, Facts and LatestSummary, follows every insert,
// update, delete and erasure, made through it, through another store on
// the same database, or by plain SQL, on its very next search; an erased
// user's items never come back. open must return replicas on a fresh,
// empty database for every call and register their cleanup.
func RunFreshness(t *testing.T, open func(t *testing.T) Replicas) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, r Replicas)
	}{
		{"SearchVectorSeesEveryChange", testSearchVectorSeesEveryChange},
		{"SearchTextSeesEveryChange", testSearchTextSeesEveryChange},
		{"SearchesSeeEveryItemChange", testSearchesSeeEveryItemChange},
		{"ErasedUserNeverComesBack", testErasedUserNeverComesBack},
		{"SearchItemsAreCopies", testSearchItemsAreCopies},
		{"SearchVectorScoresMatchCosine", testSearchVectorScoresMatchCosine},
		{"MessagesAroundSeesEveryChange", testMessagesAroundSeesEveryChange},
		{"RecentSeesEveryChange", testRecentSeesEveryChange},
		{"FactsAndSummarySeeEveryChange", testFactsAndSummarySeeEveryChange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

// vecItem is an item of acme/alice with a vector of model m.
func vecItem(conv, ref string, v ...float32) memory.Item {
	return memory.Item{Tenant: "acme", User: "alice", Conversation: conv, Kind: "message", Ref: ref,
		Text: "text of " + ref, Embedding: v, Model: "m", Dims: len(v)}
}

// searchRefs runs search (a store's SearchVector or SearchText) for q and
// returns the refs found, best first.
func searchRefs(t *testing.T, search func(context.Context, memory.ItemQuery) ([]memory.Item, error), q memory.ItemQuery) []string {
	t.Helper()
	items, err := search(testCtx(t), q)
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	return refs(items)
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testSearchVectorSeesEveryChange searches between writes that the
// vectors held in memory must follow: inserts, an upsert that changes a
// vector, new vectors set by another store, a conversation changed and
// rows deleted by another connection, and inserts by another store.
func testSearchVectorSeesEveryChange(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s, other := r.Mine, r.Other
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: "m", Dims: 4, Limit: 10}
	want := func(step string, q memory.ItemQuery, refs ...string) {
		t.Helper()
		if got := searchRefs(t, s.SearchVector, q); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchVector = %v, want %v", step, got, refs)
		}
	}
	want("empty", q)
	must(t, s.AddItems(ctx, []memory.Item{vecItem("c1", "a", 1, 0, 0, 0), vecItem("c2", "b", 1, 1, 0, 0)}))
	want("first items", q, "a", "b")
	must(t, s.AddItems(ctx, []memory.Item{vecItem("c1", "c", 1, 0.5, 0, 0)}))
	want("insert", q, "a", "c", "b")
	// An upsert of b with a new vector keeps b's id: the rank must move.
	must(t, s.AddItems(ctx, []memory.Item{vecItem("c2", "b", 1, 0.1, 0, 0)}))
	want("upsert", q, "a", "b", "c")
	// Another process adds, another connection deletes.
	must(t, other.AddItems(ctx, []memory.Item{vecItem("c3", "d", 0.9, 0.01, 0, 0)}))
	want("insert by another store", q, "a", "d", "b", "c")
	must(t, r.Exec(ctx, `DELETE FROM memory_items WHERE conversation = 'c1'`))
	want("delete by another connection", q, "d", "b")
	// Filters apply to the vectors held.
	cq := q
	cq.Conversation = "c2"
	want("conversation", cq, "b")
	xq := q
	xq.ExcludeRefs = []string{"d"}
	want("excluded ref", xq, "b")
	must(t, r.Exec(ctx, `UPDATE memory_items SET conversation = 'c3' WHERE source = 'b'`))
	want("conversation changed by another connection", cq)
	// A new vector set by another store (a reindex) moves b's rank.
	b := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0.1, 0, 0), Model: "m", Dims: 4, Limit: 1})
	if len(b) != 1 || b[0].Ref != "b" {
		t.Fatalf("b not found: %v", refs(b))
	}
	b[0].Embedding, b[0].Model, b[0].Dims = vec4(1, 0, 0, 0), "m", 4
	must(t, other.EmbedItems(ctx, b[:1]))
	want("vector set by another store", q, "b", "d")
	// Other users, models and dimensions are never mixed in.
	bob := vecItem("c1", "e", 1, 0, 0, 0)
	bob.User = "bob"
	three := vecItem("c1", "f", 1, 0, 0)
	otherModel := vecItem("c1", "g", 1, 0, 0, 0)
	otherModel.Model = "m2"
	must(t, s.AddItems(ctx, []memory.Item{bob, three, otherModel}))
	want("scope", q, "b", "d")
	must(t, other.DeleteUser(ctx, "acme", "alice"))
	want("user deleted by another store", q)
}

// testSearchTextSeesEveryChange searches between writes that the text
// index held in memory must follow: inserts, an upsert that changes a
// text, writes by a second store and another connection, and the user's
// erasure.
func testSearchTextSeesEveryChange(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s, other := r.Mine, r.Other
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "porto", Limit: 10}
	item := func(conv, ref, text string) memory.Item {
		return memory.Item{Tenant: "acme", User: "alice", Conversation: conv, Kind: "message", Ref: ref, Text: text}
	}
	want := func(step string, refs ...string) {
		t.Helper()
		if got := searchRefs(t, s.SearchText, q); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchText = %v, want %v", step, got, refs)
		}
	}
	want("empty")
	must(t, s.AddItems(ctx, []memory.Item{item("c1", "a", "porto porto porto"), item("c2", "b", "lisbon then porto and more words")}))
	want("first items", "a", "b")
	// An upsert of b with a new text keeps b's id: the index must follow.
	must(t, s.AddItems(ctx, []memory.Item{item("c2", "b", "lisbon only")}))
	want("upsert", "a")
	must(t, other.AddItems(ctx, []memory.Item{item("c3", "d", "porto wine")}))
	want("insert by another store", "a", "d")
	must(t, r.Exec(ctx, `UPDATE memory_items SET conversation = 'c4' WHERE source = 'd'`))
	cq := q
	cq.Conversation = "c4"
	if got := searchRefs(t, s.SearchText, cq); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("conversation changed by another connection: SearchText = %v, want [d]", got)
	}
	must(t, r.Exec(ctx, `DELETE FROM memory_items WHERE conversation = 'c1'`))
	want("delete by another connection", "d")
	must(t, other.AddItems(ctx, []memory.Item{item("c2", "b", "porto again")}))
	want("upsert by another store", "b", "d")
	must(t, s.DeleteUser(ctx, "acme", "alice"))
	want("user erased")
}

// testSearchesSeeEveryItemChange searches, by vector and by text, between
// writes that the items the searches return (kept in memory after the
// first search) must follow: a new text, a new time said, a second store
// writing the same database (a new time said alone too), and the user's
// erasure. After an erasure
// nothing of the user comes back, from either search.
func testSearchesSeeEveryItemChange(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s, other := r.Mine, r.Other
	item := func(text string, said time.Time) memory.Item {
		it := vecItem("c1", "a", 1, 0, 0, 0)
		it.Text, it.SaidAt = text, said
		return it
	}
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: "m", Dims: 4, Limit: 10}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "porto", Limit: 10}
	search := func(step string) [2]string {
		t.Helper()
		var out [2]string
		for i, f := range []func(context.Context, memory.ItemQuery) ([]memory.Item, error){s.SearchVector, s.SearchText} {
			q := []memory.ItemQuery{vq, tq}[i]
			items, err := f(ctx, q)
			if err != nil {
				t.Fatalf("%s: search: %v", step, err)
			}
			for _, it := range items {
				out[i] += fmt.Sprintf("%s@%d;", it.Text, it.SaidAt.Unix())
			}
		}
		return out
	}
	want := func(step string, v, txt string) {
		t.Helper()
		// Twice: the second search is answered from memory.
		for range 2 {
			if got := search(step); got != [2]string{v, txt} {
				t.Fatalf("%s: vector search %q, text search %q; want %q, %q", step, got[0], got[1], v, txt)
			}
		}
	}
	t1, t2, t3 := time.Unix(1000, 0), time.Unix(2000, 0), time.Unix(3000, 0)
	must(t, s.AddItems(ctx, []memory.Item{item("lives in porto", t1)}))
	want("first", "lives in porto@1000;", "lives in porto@1000;")
	must(t, s.AddItems(ctx, []memory.Item{item("moved to porto", t1)}))
	want("new text", "moved to porto@1000;", "moved to porto@1000;")
	must(t, s.AddItems(ctx, []memory.Item{item("moved to porto", t2)}))
	want("new time said", "moved to porto@2000;", "moved to porto@2000;")
	must(t, other.AddItems(ctx, []memory.Item{item("moved to porto again", t3)}))
	want("other store", "moved to porto again@3000;", "moved to porto again@3000;")
	must(t, other.AddItems(ctx, []memory.Item{item("moved to porto again", t1)}))
	want("time said by the other store", "moved to porto again@1000;", "moved to porto again@1000;")
	must(t, other.DeleteUser(ctx, "acme", "alice"))
	want("erased by the other store", "", "")
	// A new item of the erased user, written later, is found, and only it.
	fresh := vecItem("c9", "z", 1, 0, 0, 0)
	fresh.Text, fresh.SaidAt = "porto trip", t3
	must(t, s.AddItems(ctx, []memory.Item{fresh}))
	want("after the erasure", "porto trip@3000;", "porto trip@3000;")
	must(t, s.DeleteUser(ctx, "acme", "alice"))
	want("erased", "", "")
}

// testErasedUserNeverComesBack warms every in-memory cache of one store
// (vectors, text index, items), erases the user through the other store,
// and checks no cache answers with the erased items, nor with them beside
// as many new ones written after the erasure (the revision counters must
// not return to the values the caches were read at), while a bystander's
// cached items stay searchable.
func testErasedUserNeverComesBack(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s, other := r.Mine, r.Other
	item := func(user, ref, text string) memory.Item {
		return memory.Item{Tenant: "acme", User: user, Conversation: "c1", Kind: "message", Ref: ref, Text: text,
			Embedding: vec4(1, 0, 0, 0), Model: "m", Dims: 4}
	}
	vq := func(user string) memory.ItemQuery {
		return memory.ItemQuery{Tenant: "acme", User: user, Embedding: vec4(1, 0, 0, 0), Model: "m", Dims: 4, Limit: 10}
	}
	tq := func(user string) memory.ItemQuery {
		return memory.ItemQuery{Tenant: "acme", User: user, Text: "porto", Limit: 10}
	}
	check := func(step, user string, refs ...string) {
		t.Helper()
		if got := searchRefs(t, s.SearchVector, vq(user)); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchVector(%s) = %v, want %v", step, user, got, refs)
		}
		if got := searchRefs(t, s.SearchText, tq(user)); !slices.Equal(got, refs) {
			t.Fatalf("%s: SearchText(%s) = %v, want %v", step, user, got, refs)
		}
	}
	must(t, s.AddItems(ctx, []memory.Item{item("alice", "a1", "porto"), item("alice", "a2", "porto"), item("bob", "b1", "porto")}))
	check("cached", "alice", "a1", "a2")
	check("cached", "bob", "b1")
	must(t, other.DeleteUser(ctx, "acme", "alice"))
	check("erased by another store", "alice")
	check("bystander", "bob", "b1")
	// As many items as before come back after the erasure: the caches
	// must not take them for the ones they held.
	must(t, other.AddItems(ctx, []memory.Item{item("alice", "n1", "porto"), item("alice", "n2", "porto")}))
	check("written after the erasure", "alice", "n1", "n2")
	must(t, s.DeleteUser(ctx, "acme", "alice"))
	check("erased again", "alice")
	// Erased once more, with the caches warm, and refilled at once.
	must(t, s.AddItems(ctx, []memory.Item{item("alice", "m1", "porto"), item("alice", "m2", "porto")}))
	check("refilled", "alice", "m1", "m2")
	must(t, other.DeleteUser(ctx, "acme", "alice"))
	must(t, other.AddItems(ctx, []memory.Item{item("alice", "p1", "porto"), item("alice", "p2", "porto")}))
	check("erased and refilled before the next search", "alice", "p1", "p2")
}

// testSearchItemsAreCopies checks a caller changing a returned item, or
// appending to its embedding (which memory.Item.Embedding allows; writing
// into it is not), does not change what the next search returns.
func testSearchItemsAreCopies(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s := r.Mine
	it := vecItem("c1", "a", 1, 0, 0, 0)
	it.Text = "porto"
	must(t, s.AddItems(ctx, []memory.Item{it}))
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: "m", Dims: 4, Text: "porto", Limit: 10}
	for i := range 3 {
		for _, search := range []func(context.Context, memory.ItemQuery) ([]memory.Item, error){s.SearchVector, s.SearchText} {
			items, err := search(ctx, q)
			if err != nil || len(items) != 1 {
				t.Fatalf("search %d: %v, %v", i, items, err)
			}
			got := items[0]
			if len(got.Embedding) != 4 || got.Embedding[0] != 1 || got.Score <= 0 || got.Ref != "a" || got.Text != "porto" {
				t.Fatalf("search %d: %+v", i, got)
			}
			if e := append(got.Embedding, 7); &e[0] == &got.Embedding[0] {
				t.Fatalf("search %d: an append wrote into the store's embedding array", i)
			}
			items[0].Ref, items[0].Text, items[0].Score = "changed", "changed", 0
		}
	}
}

// testSearchVectorScoresMatchCosine checks the scores of the vectors held
// in memory are the cosine similarities, and a zero vector never matches.
func testSearchVectorScoresMatchCosine(t *testing.T, r Replicas) {
	s := r.Mine
	mustAddItems(t, s, vecItem("c1", "a", 3, 4, 0, 0), vecItem("c1", "z", 0, 0, 0, 0))
	items := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice",
		Embedding: vec4(1, 0, 0, 0), Model: "m", Dims: 4, Limit: 5})
	if len(items) != 1 || items[0].Ref != "a" || items[0].Score < 0.5999 || items[0].Score > 0.6001 {
		t.Fatalf("SearchVector = %+v, want only a with score 0.6 (a zero vector never matches)", items)
	}
}
