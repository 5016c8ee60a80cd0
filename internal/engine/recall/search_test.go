package recall

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func refs(items []memory.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Ref
	}
	return out
}

func eqStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFuse(t *testing.T) {
	it := func(ref string) memory.Item { return memory.Item{Kind: KindMessage, Ref: ref} }
	tests := []struct {
		name  string
		lists [][]memory.Item
		want  []string
		top   float64
	}{
		{"both lists beat one", [][]memory.Item{{it("a"), it("b")}, {it("b"), it("c")}}, []string{"b", "a", "c"}, (1.0/62 + 1.0/61) / (2.0 / 61)},
		{"first in both scores 1", [][]memory.Item{{it("a")}, {it("a")}}, []string{"a"}, 1},
		{"one list keeps its order", [][]memory.Item{{it("x"), it("y"), it("z")}, nil}, []string{"x", "y", "z"}, 0.5},
		{"deep agreement beats a single top hit", [][]memory.Item{{it("top"), it("p1"), it("p2"), it("both")}, {it("q1"), it("q2"), it("both")}}, []string{"both", "top", "q1", "p1", "q2", "p2"}, (1.0/64 + 1.0/63) / (2.0 / 61)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fuse(tt.lists...)
			if !eqStrings(refs(got), tt.want) {
				t.Fatalf("order = %v, want %v", refs(got), tt.want)
			}
			if math.Abs(got[0].Score-tt.top) > 1e-12 {
				t.Fatalf("top score = %v, want %v", got[0].Score, tt.top)
			}
		})
	}
}

func TestFuseChunksAreDistinct(t *testing.T) {
	a := memory.Item{Kind: KindMessage, Ref: "x:0", Chunk: 0}
	b := memory.Item{Kind: KindMessage, Ref: "x:0", Chunk: 1}
	if got := Fuse([]memory.Item{a, b}); len(got) != 2 {
		t.Fatalf("chunks of one message merged: %d items", len(got))
	}
}

func TestRecencyWeight(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		age, half time.Duration
		want      float64
	}{
		{0, 90 * day, 1},
		{90 * day, 90 * day, 0.5},
		{180 * day, 90 * day, 0.25},
		{365 * day, 0, 1},
		{-day, 90 * day, 1},
	}
	for _, tt := range tests {
		if got := RecencyWeight(tt.age, tt.half); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("RecencyWeight(%v, %v) = %v, want %v", tt.age, tt.half, got, tt.want)
		}
	}
}

func TestDedup(t *testing.T) {
	l := NewLocal(384)
	vec := func(s string) []float32 { v, _ := l.Embed(context.Background(), []string{s}, time.Time{}); return v[0] }
	mk := func(ref, text string) memory.Item { return memory.Item{Ref: ref, Text: text, Embedding: vec(text)} }
	tests := []struct {
		name  string
		items []memory.Item
		limit int
		want  []string
	}{
		{"same text after normalising", []memory.Item{mk("a", "I live in Lisbon."), mk("b", "i LIVE in lisbon"), mk("c", "I am vegetarian")}, 0, []string{"a", "c"}},
		{"near-identical vectors", []memory.Item{mk("a", "I really love the old town of Lisbon and its trams"), mk("b", "I really love the old town of Lisbon and its trams!!! :)"), mk("c", "the rent is 1.200 euros")}, 0, []string{"a", "c"}},
		{"distinct kept in order up to limit", []memory.Item{mk("a", "vegetarian dinner"), mk("b", "moved to Porto"), mk("c", "saving for a car")}, 2, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refs(Dedup(tt.items, tt.limit)); !eqStrings(got, tt.want) {
				t.Fatalf("kept %v, want %v", got, tt.want)
			}
		})
	}
}

// mustIndex stores items for (tenant, user) embedded with emb.
func mustIndex(t *testing.T, st *fakeStore, emb Embedder, items ...memory.Item) {
	t.Helper()
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.Text
	}
	vecs, err := emb.Embed(context.Background(), texts, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		items[i].Embedding, items[i].Model, items[i].Dims = vecs[i], emb.Model(), emb.Dims()
		if items[i].Kind == "" {
			items[i].Kind = KindMessage
		}
	}
	if err := st.AddItems(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

func TestSearcher(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	emb := NewLocal(384)
	st := newFakeStore()
	u := func(conv, ref, text string, age time.Duration) memory.Item {
		return memory.Item{Tenant: "t1", User: "u1", Conversation: conv, Ref: ref, Text: text, CreatedAt: now.Add(-age)}
	}
	day := 24 * time.Hour
	mustIndex(t, st, emb,
		u("A", "a:0", "I am vegetarian and I live in Lisbon", 80*day),
		u("A", "a:1", "My car needs new tyres before the trip", 80*day),
		u("B", "b:0", "Vegetarian restaurants in Lisbon are great", 1*day),
		u("B", "b:1", "The meeting moved to Tuesday", 1*day),
		memory.Item{Tenant: "t1", User: "u2", Conversation: "A", Ref: "x:0", Text: "I am vegetarian too, from Lisbon", CreatedAt: now},
		memory.Item{Tenant: "t2", User: "u1", Conversation: "A", Ref: "y:0", Text: "I am vegetarian and live in Lisbon", CreatedAt: now},
	)
	tests := []struct {
		name string
		opts SearchOptions
		q    SearchQuery
		want []string
	}{
		{"relevant first, unrelated filtered", SearchOptions{TopK: 5, MinSimilarity: 0.2}, SearchQuery{Text: "vegetarian dinner in Lisbon?"}, []string{"a:0", "b:0"}},
		{"recency favours the newer passage", SearchOptions{TopK: 5, MinSimilarity: 0.2, RecencyHalfLife: 7 * day}, SearchQuery{Text: "vegetarian dinner in Lisbon?"}, []string{"b:0", "a:0"}},
		{"time words favour what was said then", SearchOptions{TopK: 5, MinSimilarity: 0.2}, SearchQuery{Text: "vegetarian dinner in Lisbon last week?"}, []string{"b:0", "a:0"}},
		{"time words favour what was said then, Portuguese", SearchOptions{TopK: 5, MinSimilarity: 0.2}, SearchQuery{Text: "vegetarian dinner in Lisbon ontem?"}, []string{"b:0", "a:0"}},
		{"a month before favours the older passage", SearchOptions{TopK: 5, MinSimilarity: 0.2, RecencyHalfLife: 365 * day}, SearchQuery{Text: "vegetarian dinner in Lisbon in March?"}, []string{"a:0", "b:0"}},
		{"conversation restriction", SearchOptions{TopK: 5, MinSimilarity: 0.2}, SearchQuery{Text: "vegetarian Lisbon", Conversation: "B"}, []string{"b:0"}},
		{"exclude refs", SearchOptions{TopK: 5, MinSimilarity: 0.2}, SearchQuery{Text: "vegetarian Lisbon", ExcludeRefs: []string{"a:0"}}, []string{"b:0"}},
		{"top k", SearchOptions{TopK: 1, MinSimilarity: 0.2}, SearchQuery{Text: "vegetarian Lisbon"}, []string{"a:0"}},
		{"empty query", SearchOptions{TopK: 5}, SearchQuery{Text: "  "}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSearcher(st, emb, tt.opts)
			q := tt.q
			q.Tenant, q.User, q.Now = "t1", "u1", now
			got, err := s.Search(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if !eqStrings(refs(got), tt.want) {
				t.Fatalf("refs = %v, want %v", refs(got), tt.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Score > got[i-1].Score {
					t.Fatal("not best first")
				}
			}
		})
	}
}

// TestSearcherReturnsAMessageOnce: the chunks of one long message that
// all match take one place of the top k, the best one's; the next
// places go to other messages (a passage shows a message once).
func TestSearcherReturnsAMessageOnce(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	emb := NewLocal(384)
	st := newFakeStore()
	m := func(ref string, chunk int, text string) memory.Item {
		return memory.Item{Tenant: "t1", User: "u1", Conversation: "A", Kind: KindMessage, Ref: ref, Chunk: chunk, Text: text, CreatedAt: now}
	}
	mustIndex(t, st, emb,
		m("long", 0, "Vegetarian restaurants in Lisbon: the best one is by the river"),
		m("long", 1, "Vegetarian restaurants in Lisbon: the second best is uphill"),
		m("long", 2, "Vegetarian restaurants in Lisbon: the third is near the station"),
		m("short", 0, "I am vegetarian and I live in Lisbon"),
		m("other", 0, "Lisbon has vegetarian markets on Saturdays"),
	)
	s := NewSearcher(st, emb, SearchOptions{TopK: 3, MinSimilarity: 0.1})
	got, err := s.Search(context.Background(), SearchQuery{Tenant: "t1", User: "u1", Text: "vegetarian restaurants in Lisbon", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, it := range got {
		if seen[it.Ref] {
			t.Fatalf("message %s returned twice: %v", it.Ref, refs(got))
		}
		seen[it.Ref] = true
	}
	if len(got) != 3 || !seen["long"] || !seen["short"] || !seen["other"] {
		t.Fatalf("refs = %v, want long, short and other once each", refs(got))
	}
}

func TestSearcherMinSimilarityDropsVectorOnlyMatches(t *testing.T) {
	emb := NewLocal(384)
	st := newFakeStore()
	mustIndex(t, st, emb, memory.Item{Tenant: "t", User: "u", Ref: "r", Text: "tyres for the car"})
	for _, tt := range []struct {
		min  float64
		want int
	}{{-1, 1}, {0.99, 0}} {
		s := NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: tt.min})
		got, err := s.Search(context.Background(), SearchQuery{Tenant: "t", User: "u", Text: "quiet weekend"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.want {
			t.Errorf("min %.2f: %d results, want %d", tt.min, len(got), tt.want)
		}
	}
}

// TestSearcherEmbedsFewTextOnlyHits: the chunks of a pasted document past
// its embedded runs are stored without vectors; a query matching many of
// them embeds the best maxResultEmbeds on its behalf, not all, and still
// returns the others (deduplicated by text).
func TestSearcherEmbedsFewTextOnlyHits(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var items []memory.Item
	for i := range 40 { // 40 text-only chunks, of distinct messages here
		items = append(items, memory.Item{Tenant: "t1", User: "u1", Conversation: "A", Kind: KindMessage, Ref: "doc" + strconv.Itoa(i), Chunk: 100,
			Text: "Invoice " + strconv.Itoa(i) + ": the lighthouse keeper ordered " + strconv.Itoa(i*7) + " lamps.", CreatedAt: now})
	}
	st := newFakeStore()
	if err := st.AddItems(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	emb := &countingEmbedder{Embedder: NewLocal(64)}
	s := NewSearcher(st, emb, SearchOptions{TopK: 30})
	got, err := s.Search(context.Background(), SearchQuery{Tenant: "t1", User: "u1", Text: "lighthouse keeper lamps", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if maxResultEmbeds >= len(items) {
		t.Fatalf("the test needs more text-only hits than maxResultEmbeds (%d)", maxResultEmbeds)
	}
	if emb.texts > 1+maxResultEmbeds {
		t.Fatalf("embedded %d texts for one search, want the query and at most %d hits", emb.texts, maxResultEmbeds)
	}
	if len(got) < 20 {
		t.Fatalf("%d passages, want the text-only hits still returned", len(got))
	}
}
