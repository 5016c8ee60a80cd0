package recall

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func factValues(fs []memory.Fact) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Value
	}
	return out
}

func TestRecallRanksAndCapsFacts(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	fact := func(typ memory.FactType, key, value string, mentions int, age time.Duration, pinned bool) memory.Fact {
		return memory.Fact{Tenant: "t", User: "u", Type: typ, Key: key, Value: value, Mentions: mentions, Pinned: pinned, UpdatedAt: now.Add(-age)}
	}
	seed := func(st *fakeStore) {
		st.facts = []memory.Fact{
			fact(memory.FactPreference, "music", "likes jazz", 5, time.Hour, false),
			fact(memory.FactProfile, "diet", "vegetarian", 1, 48*time.Hour, false),
			fact(memory.FactGoal, "savings", "save R$ 5.000 by June", 1, time.Minute, true),
			fact(memory.FactPreference, "sport", "plays tennis", 5, time.Minute, false),
			fact(memory.FactEvent, "trip", "trip to Rome", 9, 0, false),
		}
		st.facts[4].ExpiresAt = &past // expired: never returned
		old := st.facts[1]
		old.Value, old.SupersededAt = "eats meat", &past // superseded: never returned
		st.facts = append(st.facts, old)
		st.facts = append(st.facts, fact(memory.FactLimit, "rent", "rent under 1.200 euros", 1, 0, false))
		st.facts[len(st.facts)-1].ExpiresAt = &future
	}
	tests := []struct {
		name  string
		query string
		max   int
		want  []string
	}{
		{"relevant, then pinned, then mentions, then recency", "any vegetarian dinner ideas?", 10,
			[]string{"vegetarian", "save R$ 5.000 by June", "plays tennis", "likes jazz", "rent under 1.200 euros"}},
		{"cap keeps the best", "any vegetarian dinner ideas?", 2, []string{"vegetarian", "save R$ 5.000 by June"}},
		{"cap keeps the relevant fact over an unrelated pin", "any vegetarian dinner ideas?", 1, []string{"vegetarian"}},
		{"no query: mentions then recency", "", 10,
			[]string{"save R$ 5.000 by June", "plays tennis", "likes jazz", "rent under 1.200 euros", "vegetarian"}},
		{"cap zero", "vegetarian", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			seed(st)
			emb := NewLocal(384)
			r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{TopK: 5}), emb, RecallOptions{FactsMax: tt.max, FactRelevance: 0.2, CrossConversation: true})
			got, err := r.Recall(context.Background(), memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Text: tt.query, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if !eqStrings(factValues(got.Facts), tt.want) {
				t.Fatalf("facts = %q, want %q", factValues(got.Facts), tt.want)
			}
		})
	}
}

func TestRecallPassagesScope(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	emb := NewLocal(384)
	st := newFakeStore()
	item := func(conv, kind, ref, text string) memory.Item {
		return memory.Item{Tenant: "t", User: "u", Conversation: conv, Kind: kind, Ref: ref, Text: text, CreatedAt: now}
	}
	mustIndex(t, st, emb,
		item("A", KindMessage, "a:0", "I am vegetarian, any Lisbon tips?"),
		item("B", KindMessage, "b:0", "Vegetarian places near Lisbon old town"),
		item("B", KindSummary, "B:v1", "The user is vegetarian and asked about Lisbon"),
		item("A", KindFact, "1", "profile diet: vegetarian in Lisbon"),
	)
	tests := []struct {
		name       string
		configured bool
		request    bool
		exclude    []string
		want       []string
	}{
		{"cross on: other conversations, no fact items, no own summary", true, true, nil, []string{"a:0", "b:0"}},
		{"cross off by config", false, true, nil, []string{"b:0"}},
		{"cross off by request", true, false, nil, []string{"b:0"}},
		{"recent window excluded", true, true, []string{"b:0"}, []string{"a:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: 0.1}), emb, RecallOptions{FactsMax: 20, CrossConversation: tt.configured})
			got, err := r.Recall(context.Background(), memory.RecallQuery{
				Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "B"}, Text: "vegetarian food in Lisbon",
				CrossConversation: tt.request, ExcludeRefs: tt.exclude, Now: now,
			})
			if err != nil {
				t.Fatal(err)
			}
			got2 := refs(got.Items)
			// order between equally dated passages may differ; compare as sets
			if len(got2) != len(tt.want) || !sameSet(got2, tt.want) {
				t.Fatalf("items = %v, want %v", got2, tt.want)
			}
			for _, it := range got.Items {
				if it.Embedding != nil || it.Score <= 0 {
					t.Fatalf("item %s: embedding leaked or no score", it.Ref)
				}
			}
		})
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestRecallSupersessionLisbonToPorto(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	emb := NewLocal(384)
	ix := NewIndexer(st, emb, nil)
	r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{TopK: 5}), emb, RecallOptions{FactsMax: 20, CrossConversation: true})
	m := NewManager(st, ix, r, 200, nil)
	march := time.Now().Add(-90 * 24 * time.Hour)
	st.UpsertFact(ctx, memory.Fact{Tenant: "t", User: "u", Type: memory.FactProfile, Key: "city", Value: "I live in Lisbon", Pinned: true, UpdatedAt: march}, 200)
	if _, err := m.AddFact(ctx, memory.Fact{Tenant: "t", User: "u", Type: memory.FactProfile, Key: "city", Value: "I moved to Porto"}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Recall(ctx, memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Text: "where do I live?"})
	if err != nil {
		t.Fatal(err)
	}
	if vals := factValues(got.Facts); !eqStrings(vals, []string{"I moved to Porto"}) {
		t.Fatalf("facts = %q, want only Porto", vals)
	}
	hist, _ := m.Facts(ctx, "t", "u", true)
	if len(hist) != 2 {
		t.Fatalf("history has %d facts, want Lisbon kept as superseded", len(hist))
	}
	found, err := m.Search(ctx, "t", "u", "live Porto Lisbon", 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range found {
		if it.Kind == KindFact && it.Text != FactText(got.Facts[0]) {
			t.Fatalf("search returned a non-current fact: %q", it.Text)
		}
	}
}

func TestQueryText(t *testing.T) {
	msg := func(role, text string) memory.Message { return memory.Message{Role: role, Content: text} }
	tests := []struct {
		name string
		msgs []memory.Message
		want string
	}{
		{"long user message alone", []memory.Message{msg("assistant", "Hi"), msg("user", "Can you recommend a vegetarian dinner place in Porto tonight?")}, "Can you recommend a vegetarian dinner place in Porto tonight?"},
		{"short follow-up gets the assistant turn", []memory.Message{msg("user", "Where to eat in Porto?"), msg("assistant", "Try Da Terra, it is vegetarian."), msg("user", "and in Lisbon?")}, "Try Da Terra, it is vegetarian.\nand in Lisbon?"},
		{"short first message", []memory.Message{msg("system", "be nice"), msg("user", "hello")}, "hello"},
		{"tool results after user", []memory.Message{msg("user", "weather in Lisbon please, for the whole week ahead"), msg("assistant", "[tool_call w()]"), msg("tool", "18C")}, "weather in Lisbon please, for the whole week ahead"},
		{"no user", []memory.Message{msg("system", "x")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QueryText(tt.msgs); got != tt.want {
				t.Fatalf("QueryText = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPassagesGrowWithTheBudget: recall returns MaxPassages for small or
// unknown budgets, one passage per budgetPerPassage tokens for larger ones,
// and never more than maxBudgetPassages.
func TestPassagesGrowWithTheBudget(t *testing.T) {
	r := &Recaller{opts: RecallOptions{MaxPassages: 64}}
	tests := []struct {
		budget, want int
	}{
		{0, 64},
		{4000, 64},
		{8000, 125},
		{16000, 250},
		{1 << 20, maxBudgetPassages},
	}
	for _, tt := range tests {
		if got := r.passages(tt.budget); got != tt.want {
			t.Errorf("passages(%d) = %d, want %d", tt.budget, got, tt.want)
		}
	}
	small := &Recaller{opts: RecallOptions{MaxPassages: 300}}
	if got := small.passages(8000); got != 300 {
		t.Errorf("a MaxPassages above the budget's count: passages = %d, want 300", got)
	}
}
