package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// testModel is the embedding model the item fixtures are made with.
const testModel = "test-embed"

// scoreTolerance absorbs float32 arithmetic in cosine similarities.
const scoreTolerance = 1e-4

// vec4 builds a 4-dimension vector.
func vec4(a, b, c, d float32) []float32 { return []float32{a, b, c, d} }

// item builds a recallable item of id's conversation, embedded with testModel
// (or unembedded when vec is nil), created at baseTime.
func item(id memory.Identity, kind, ref, text string, vec []float32) memory.Item {
	it := memory.Item{
		Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
		Kind: kind, Ref: ref, Text: text, Embedding: vec,
		CreatedAt: baseTime,
	}
	if vec != nil {
		it.Model, it.Dims = testModel, len(vec)
	}
	return it
}

// mustAddItems stores items.
func mustAddItems(tb testing.TB, s Knowledge, items ...memory.Item) {
	tb.Helper()
	if err := s.AddItems(testCtx(tb), items); err != nil {
		tb.Fatalf("AddItems(%d items): %v", len(items), err)
	}
}

// mustSearchVector runs a vector search.
func mustSearchVector(tb testing.TB, s Knowledge, q memory.ItemQuery) []memory.Item {
	tb.Helper()
	got, err := s.SearchVector(testCtx(tb), q)
	if err != nil {
		tb.Fatalf("SearchVector: %v", err)
	}
	return got
}

// mustSearchText runs a full-text search.
func mustSearchText(tb testing.TB, s Knowledge, q memory.ItemQuery) []memory.Item {
	tb.Helper()
	got, err := s.SearchText(testCtx(tb), q)
	if err != nil {
		tb.Fatalf("SearchText(%q): %v", q.Text, err)
	}
	return got
}

// refs projects items to their refs, in order.
func refs(items []memory.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Ref
	}
	return out
}

// assertRefs compares items by ref, in order.
func assertRefs(tb testing.TB, what string, got []memory.Item, want []string) {
	tb.Helper()
	if g := refs(got); !slices.Equal(g, want) && (len(g) != 0 || len(want) != 0) {
		tb.Fatalf("%s = %q, want %q", what, g, want)
	}
}

// assertBestFirst checks that scores never increase down a result list.
func assertBestFirst(tb testing.TB, what string, got []memory.Item) {
	tb.Helper()
	for i := 1; i < len(got); i++ {
		if got[i].Score > got[i-1].Score {
			tb.Fatalf("%s: item %d (%s) scores %v above item %d (%s) at %v", what, i, got[i].Ref, got[i].Score, i-1, got[i-1].Ref, got[i-1].Score)
		}
	}
}

// testAddItemsIdempotent covers AddItems on an existing (kind, ref, chunk):
// text and embedding are updated, no duplicate is made; another chunk or
// kind of the same ref is another item.
func testAddItemsIdempotent(t *testing.T, s KnowledgeStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	first := item(id, "message", "ex-1:0", "I adopted a cat named Pixel", vec4(1, 0, 0, 0))
	mustAddItems(t, s, first)
	mustAddItems(t, s, first) // identical redelivery
	updated := first
	updated.Text = "I adopted a dog named Byte"
	updated.Embedding = vec4(0, 1, 0, 0)
	second := item(id, "message", "ex-1:0", "and a parrot", vec4(0, 0, 1, 0))
	second.Chunk = 1
	asSummary := item(id, "summary", "ex-1:0", "summary text about a goldfish", vec4(0, 0, 0, 1))
	mustAddItems(t, s, updated, second, asSummary)

	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(0, 1, 0, 0), Model: testModel, Dims: 4, Limit: 10}
	got := mustSearchVector(t, s, q)
	if len(got) != 3 {
		t.Fatalf("SearchVector = %d items %q, want 3 (no duplicates)", len(got), refs(got))
	}
	top := got[0]
	if top.Ref != "ex-1:0" || top.Kind != "message" || top.Chunk != 0 || top.Text != updated.Text || math.Abs(top.Score-1) > scoreTolerance {
		t.Fatalf("best match = %+v, want the updated chunk 0 with score 1", top)
	}
	if top.ID == 0 || top.User != "alice" || top.Conversation != "c1" || top.Model != testModel || top.Dims != 4 || !top.CreatedAt.Equal(baseTime) {
		t.Fatalf("best match fields = %+v", top)
	}
	if txt := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Pixel cat", Limit: 10}); len(txt) != 0 {
		t.Fatalf("old text still searchable after update: %q", refs(txt))
	}
	if txt := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Byte", Limit: 10}); len(txt) != 1 || txt[0].ID != top.ID {
		t.Fatalf("updated text search = %+v, want the updated item", txt)
	}
}

// rankFixture stores alice's items at known cosine similarities to
// (1, 0, 0, 0) and returns the refs best first with their similarities.
func rankFixture(t *testing.T, s Knowledge) ([]string, []float64) {
	t.Helper()
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	mustAddItems(t, s,
		item(id, "message", "orthogonal", "orthogonal", vec4(0, 3, 0, 0)),
		item(id, "message", "same", "same direction", vec4(2, 0, 0, 0)),
		item(id, "message", "opposite", "opposite", vec4(-1, 0, 0, 0)),
		item(id, "message", "diagonal", "diagonal", vec4(1, 1, 0, 0)),
		item(id, "message", "close", "close", vec4(3, 1, 0, 0)),
	)
	return []string{"same", "close", "diagonal", "orthogonal", "opposite"},
		[]float64{1, 3 / math.Sqrt(10), 1 / math.Sqrt2, 0, -1}
}

func testSearchVectorRanks(t *testing.T, s KnowledgeStore) {
	wantRefs, wantScores := rankFixture(t, s)
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(5, 0, 0, 0), Model: testModel, Dims: 4, Limit: 10}
	got := mustSearchVector(t, s, q)
	assertRefs(t, "SearchVector", got, wantRefs)
	for i, it := range got {
		if math.Abs(it.Score-wantScores[i]) > scoreTolerance {
			t.Errorf("%s Score = %v, want cosine %v", it.Ref, it.Score, wantScores[i])
		}
	}
	q.Limit = 2
	assertRefs(t, "SearchVector limit 2", mustSearchVector(t, s, q), wantRefs[:2])
}

// testSearchVectorScope covers what SearchVector never returns: other users'
// and tenants' items, other conversations when restricted, excluded refs,
// and items embedded by another model or dimension.
func testSearchVectorScope(t *testing.T, s KnowledgeStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	aliceC2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	aliceFacts := memory.Identity{Tenant: "acme", User: "alice"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	otherTenant := memory.Identity{Tenant: "other", User: "alice", Conversation: "c1"}
	otherModel := item(alice, "message", "other-model", "x", vec4(1, 0, 0, 0))
	otherModel.Model = "another-model"
	mustAddItems(t, s,
		item(alice, "message", "a1", "x", vec4(1, 0.1, 0, 0)),
		item(alice, "message", "a2", "x", vec4(1, 0.2, 0, 0)),
		item(aliceC2, "message", "a3", "x", vec4(1, 0.3, 0, 0)),
		item(aliceFacts, "fact", "7", "x", vec4(1, 0.4, 0, 0)),
		item(alice, "message", "unembedded", "x", nil),
		item(alice, "message", "three-dims", "x", []float32{1, 0, 0}),
		otherModel,
		item(bob, "message", "bob", "x", vec4(1, 0, 0, 0)),
		item(otherTenant, "message", "other-tenant", "x", vec4(1, 0, 0, 0)),
	)
	base := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Limit: 10}
	tests := []struct {
		name   string
		modify func(q *memory.ItemQuery)
		want   []string
	}{
		{"user's items only", func(*memory.ItemQuery) {}, []string{"a1", "a2", "a3", "7"}},
		{"one conversation", func(q *memory.ItemQuery) { q.Conversation = "c1" }, []string{"a1", "a2"}},
		{"unknown conversation", func(q *memory.ItemQuery) { q.Conversation = "nope" }, nil},
		{"exclude refs", func(q *memory.ItemQuery) { q.ExcludeRefs = []string{"a1", "7", "not-there"} }, []string{"a2", "a3"}},
		{"limit", func(q *memory.ItemQuery) { q.Limit = 3 }, []string{"a1", "a2", "a3"}},
		{"another model", func(q *memory.ItemQuery) { q.Model = "another-model" }, []string{"other-model"}},
		{"another dimension", func(q *memory.ItemQuery) { q.Dims, q.Embedding = 3, []float32{1, 0, 0} }, []string{"three-dims"}},
		{"other user", func(q *memory.ItemQuery) { q.User = "bob" }, []string{"bob"}},
		{"other tenant", func(q *memory.ItemQuery) { q.Tenant = "other" }, []string{"other-tenant"}},
		{"unknown user", func(q *memory.ItemQuery) { q.User = "nobody" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := base
			tt.modify(&q)
			got := mustSearchVector(t, s, q)
			assertRefs(t, "SearchVector", got, tt.want)
			assertBestFirst(t, "SearchVector", got)
		})
	}
}

// randomVector returns a deterministic pseudo-random vector of dims.
func randomVector(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// blend returns w*a + (1-w)*b.
func blend(a, b []float32, w float32) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = w*a[i] + (1-w)*b[i]
	}
	return out
}

// cosine is the reference cosine similarity, in float64.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// rankByCosine returns the refs of items ordered by cosine to q, best first.
func rankByCosine(q []float32, items []memory.Item) ([]string, map[string]float64) {
	scores := make(map[string]float64, len(items))
	out := make([]string, len(items))
	for i, it := range items {
		scores[it.Ref] = cosine(q, it.Embedding)
		out[i] = it.Ref
	}
	sort.SliceStable(out, func(i, j int) bool { return scores[out[i]] > scores[out[j]] })
	return out, scores
}

// testSearchVector384 ranks 384-dimension vectors (the local embedder's size,
// which PostgreSQL indexes) at well separated similarities.
func testSearchVector384(t *testing.T, s KnowledgeStore) {
	const dims, n = 384, 24
	r := rand.New(rand.NewPCG(1, 2))
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	q := randomVector(r, dims)
	items := make([]memory.Item, n)
	for i := range items {
		v := blend(q, randomVector(r, dims), float32(i)/float32(n))
		items[i] = item(id, "message", fmt.Sprintf("m%02d", i), fmt.Sprintf("passage %d", i), v)
	}
	mustAddItems(t, s, items...)
	want, scores := rankByCosine(q, items)
	got := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: q, Model: testModel, Dims: dims, Limit: 10})
	assertRefs(t, "SearchVector 384", got, want[:10])
	for _, it := range got {
		if math.Abs(it.Score-scores[it.Ref]) > scoreTolerance {
			t.Errorf("%s Score = %v, want %v", it.Ref, it.Score, scores[it.Ref])
		}
	}
}

// testSearchVector384Isolation puts many closer vectors under other users
// and tenants: the user's own items must still all come back, in order, up
// to Limit. (An approximate index that filters after its candidate list
// would return none.)
func testSearchVector384Isolation(t *testing.T, s KnowledgeStore) {
	const dims = 384
	r := rand.New(rand.NewPCG(3, 4))
	q := randomVector(r, dims)
	var noise []memory.Item
	for i := range 120 {
		owner := memory.Identity{Tenant: "acme", User: fmt.Sprintf("user%d", i%3), Conversation: "c1"}
		if i%2 == 0 {
			owner = memory.Identity{Tenant: fmt.Sprintf("tenant%d", i%4), User: "alice", Conversation: "c1"}
		}
		noise = append(noise, item(owner, "message", fmt.Sprintf("noise%03d", i), "noise", blend(q, randomVector(r, dims), 0.95)))
	}
	mustAddItems(t, s, noise...)
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	mine := make([]memory.Item, 6)
	for i := range mine {
		mine[i] = item(alice, "message", fmt.Sprintf("mine%d", i), "mine", blend(q, randomVector(r, dims), 0.5-0.05*float32(i)))
	}
	mustAddItems(t, s, mine...)
	want, _ := rankByCosine(q, mine)
	tests := []struct {
		limit int
		want  []string
	}{
		{10, want},
		{6, want},
		{4, want[:4]},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			got := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: q, Model: testModel, Dims: dims, Limit: tt.limit})
			assertRefs(t, "SearchVector", got, tt.want)
		})
	}
}

// testItemsToEmbed covers the resumable reindex: items whose vector is
// missing or from another model or dimension, in ID order from a cursor,
// until EmbedItems leaves none.
func testItemsToEmbed(t *testing.T, s KnowledgeStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "other", User: "bob", Conversation: "c9"}
	oldModel := item(alice, "message", "old-model", "embedded by an old model", vec4(1, 0, 0, 0))
	oldModel.Model = "old-model"
	for _, it := range []memory.Item{
		item(alice, "message", "missing-1", "no vector yet", nil),
		item(alice, "message", "current", "already embedded", vec4(1, 0, 0, 0)),
		oldModel,
		item(bob, "message", "three-dims", "three dimensions", []float32{1, 0, 0}),
		item(bob, "summary", "missing-2", "no vector either", nil),
	} {
		mustAddItems(t, s, it) // one call each, so IDs follow this order
	}
	var seen []memory.Item
	var after int64
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatalf("ItemsToEmbed never ran out: %q", refs(seen))
		}
		got, err := s.ItemsToEmbed(testCtx(t), testModel, 4, after, 2)
		if err != nil {
			t.Fatalf("ItemsToEmbed: %v", err)
		}
		if len(got) > 2 {
			t.Fatalf("ItemsToEmbed(limit 2) = %d items", len(got))
		}
		if len(got) == 0 {
			break
		}
		for _, it := range got {
			if it.ID <= after {
				t.Fatalf("ItemsToEmbed returned ID %d after cursor %d", it.ID, after)
			}
			after = it.ID
		}
		seen = append(seen, got...)
	}
	assertRefs(t, "ItemsToEmbed pages", seen, []string{"missing-1", "old-model", "three-dims", "missing-2"})
	for _, it := range seen {
		if it.Text == "" || it.Tenant == "" || it.User == "" || it.Kind == "" {
			t.Fatalf("ItemsToEmbed item lacks what a reindex needs: %+v", it)
		}
	}
	if seen[2].Tenant != "other" || seen[2].User != "bob" || seen[2].Conversation != "c9" {
		t.Fatalf("ItemsToEmbed item identity = %+v", seen[2])
	}

	// Embed the first two, as a reindex interrupted after one page would.
	vectors := map[string][]float32{"missing-1": vec4(0, 1, 0, 0), "old-model": vec4(0, 0, 1, 0), "three-dims": vec4(0, 0, 0, 1), "missing-2": vec4(1, 1, 0, 0)}
	set := func(items []memory.Item) {
		t.Helper()
		up := make([]memory.Item, len(items))
		for i, it := range items {
			up[i] = it
			up[i].Embedding, up[i].Model, up[i].Dims = vectors[it.Ref], testModel, 4
		}
		if err := s.EmbedItems(testCtx(t), up); err != nil {
			t.Fatalf("EmbedItems: %v", err)
		}
	}
	set(seen[:2])
	rest, err := s.ItemsToEmbed(testCtx(t), testModel, 4, 0, 10)
	if err != nil {
		t.Fatalf("ItemsToEmbed: %v", err)
	}
	assertRefs(t, "ItemsToEmbed after a partial reindex", rest, []string{"three-dims", "missing-2"})
	set(rest)
	if rest, err := s.ItemsToEmbed(testCtx(t), testModel, 4, 0, 10); err != nil || len(rest) != 0 {
		t.Fatalf("ItemsToEmbed after a full reindex = %q, %v; want none", refs(rest), err)
	}
	// Another dimension makes everything stale again.
	if all, err := s.ItemsToEmbed(testCtx(t), testModel, 8, 0, 10); err != nil || len(all) != 5 {
		t.Fatalf("ItemsToEmbed(dims 8) = %q, %v; want all 5", refs(all), err)
	}
	// The new vectors are searchable.
	got := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(0, 0, 1, 0), Model: testModel, Dims: 4, Limit: 1})
	if len(got) != 1 || got[0].Ref != "old-model" || got[0].Model != testModel || math.Abs(got[0].Score-1) > scoreTolerance {
		t.Fatalf("SearchVector after reindex = %+v, want old-model at score 1", got)
	}
	if got := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: "old-model", Dims: 4, Limit: 5}); len(got) != 0 {
		t.Fatalf("old model's vector still searchable: %q", refs(got))
	}
}

// testDeleteUserErasesKnowledge covers DeleteUser: the user's facts,
// summaries and items leave every search at once; other users and the same
// user in another tenant keep theirs.
func testDeleteUserErasesKnowledge(t *testing.T, s KnowledgeStore) {
	ids := []memory.Identity{
		{Tenant: "acme", User: "alice", Conversation: "c1"},
		{Tenant: "acme", User: "bob", Conversation: "c1"},
		{Tenant: "other", User: "alice", Conversation: "c1"},
	}
	for i, id := range ids {
		mustSave(t, s, simple(t, id, 1))
		if err := s.SaveSummary(testCtx(t), summary(id, 1, 2)); err != nil {
			t.Fatalf("SaveSummary: %v", err)
		}
		mustUpsertFact(t, s, fact(id.Tenant, id.User, memory.FactProfile, "city", "Lisbon", i), 0)
		mustAddItems(t, s,
			item(id, "message", "m", "the lighthouse keeper", vec4(1, 0, 0, 0)),
			item(memory.Identity{Tenant: id.Tenant, User: id.User}, "fact", "f", "city: Lisbon", vec4(0, 1, 0, 0)),
		)
	}
	if err := s.DeleteUser(testCtx(t), "acme", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	for i, id := range ids {
		wantItems := 2
		if i == 0 {
			wantItems = 0
		}
		q := memory.ItemQuery{Tenant: id.Tenant, User: id.User, Embedding: vec4(1, 1, 0, 0), Model: testModel, Dims: 4, Text: "lighthouse Lisbon", Limit: 10}
		if got := mustSearchVector(t, s, q); len(got) != wantItems {
			t.Errorf("%s/%s: SearchVector = %q, want %d items", id.Tenant, id.User, refs(got), wantItems)
		}
		if got := mustSearchText(t, s, q); len(got) != wantItems {
			t.Errorf("%s/%s: SearchText = %q, want %d items", id.Tenant, id.User, refs(got), wantItems)
		}
		if got := mustFacts(t, s, id.Tenant, id.User, baseTime, true); len(got) != wantItems/2 {
			t.Errorf("%s/%s: Facts = %+v, want %d", id.Tenant, id.User, got, wantItems/2)
		}
		_, err := s.LatestSummary(testCtx(t), id)
		if (i == 0) != (err != nil) {
			t.Errorf("%s/%s: LatestSummary err = %v", id.Tenant, id.User, err)
		}
	}
	if rest, err := s.ItemsToEmbed(testCtx(t), testModel, 8, 0, 100); err != nil || len(rest) != 4 {
		t.Fatalf("ItemsToEmbed after DeleteUser = %d items, %v; want the other users' 4", len(rest), err)
	}
}

// testReindexAfterErasure: a reindex's vectors, computed from the items
// ItemsToEmbed returned, land on those items only. When their user is
// erased meanwhile, the rows stored since (another user's, or the same
// user's new ones, which may take the erased rows' ids) keep their own
// vectors: no vector of an erased text is stored again.
func testReindexAfterErasure(t *testing.T, s KnowledgeStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	stale := func(it memory.Item) memory.Item { it.Model = "old-model"; return it }
	mustAddItems(t, s,
		stale(item(alice, "message", "a1", "the lighthouse keeper", vec4(1, 0, 0, 0))),
		stale(item(alice, "message", "a2", "my bank pin is hidden", vec4(1, 0, 0, 0))))
	todo, err := s.ItemsToEmbed(testCtx(t), testModel, 4, 0, 10)
	if err != nil || len(todo) != 2 {
		t.Fatalf("ItemsToEmbed = %q, %v; want alice's 2", refs(todo), err)
	}
	if err := s.DeleteUser(testCtx(t), "acme", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	mustAddItems(t, s,
		item(bob, "message", "b1", "bob's own words", vec4(1, 0, 0, 0)),
		item(alice, "message", "a3", "alice starts afresh", vec4(1, 0, 0, 0)))
	for i := range todo {
		todo[i].Embedding, todo[i].Model, todo[i].Dims = vec4(0, 0, 0, 1), testModel, 4
	}
	if err := s.EmbedItems(testCtx(t), todo); err != nil {
		t.Fatalf("EmbedItems: %v", err)
	}
	for _, id := range []memory.Identity{bob, alice} {
		got := mustSearchVector(t, s, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Limit: 5})
		if len(got) != 1 || math.Abs(got[0].Score-1) > scoreTolerance {
			t.Errorf("%s after a reindex of erased items: %+v; want their own item at score 1 (its own vector)", id.User, got)
		}
	}
}

// testSearchesReturnEmbeddings: an item found by either search comes with
// its vector when it was embedded with the query's model and dimensions
// (recall compares the passages it returns with each other, and would
// otherwise embed every one again); an unembedded one, or one embedded
// with another model, comes without.
func testSearchesReturnEmbeddings(t *testing.T, s KnowledgeStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	want := map[string][]float32{"a1": vec4(1, 0.5, 0, 0), "a2": vec4(0.25, 1, 0, 0), "bare": nil, "other-model": nil}
	otherModel := item(alice, "message", "other-model", "lighthouse lamp", vec4(1, 0, 0, 0))
	otherModel.Model = "another-model"
	mustAddItems(t, s,
		item(alice, "message", "a1", "harbour lighthouse", want["a1"]),
		item(alice, "message", "a2", "lighthouse keeper", want["a2"]),
		item(alice, "message", "bare", "lighthouse ghost", nil),
		otherModel,
	)
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4,
		Text: "lighthouse", Limit: 10}
	for _, search := range []struct {
		name string
		got  []memory.Item
		n    int
	}{
		{"SearchVector", mustSearchVector(t, s, q), 2},
		{"SearchText", mustSearchText(t, s, q), 4},
	} {
		if len(search.got) != search.n {
			t.Fatalf("%s found %q, want %d items", search.name, refs(search.got), search.n)
		}
		for _, it := range search.got {
			if !slices.Equal(it.Embedding, want[it.Ref]) {
				t.Errorf("%s: %s Embedding = %v, want %v", search.name, it.Ref, it.Embedding, want[it.Ref])
			}
		}
	}
}
