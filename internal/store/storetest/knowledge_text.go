package storetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// textFixture stores alice's passages for the full-text tests.
func textFixture(t *testing.T, s Knowledge) {
	t.Helper()
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	c2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	mustAddItems(t, s,
		item(c1, "message", "lisbon", "I moved to Lisbon last year with my partner", nil),
		item(c1, "message", "savings", "My savings goal is R$ 5.000 by December", vec4(1, 0, 0, 0)),
		item(c1, "message", "weather", "The weather was nice during the hike", vec4(0, 1, 0, 0)),
		item(c2, "summary", "marathon", "Training plan for the Porto marathon in November", nil),
		item(memory.Identity{Tenant: "acme", User: "alice"}, "fact", "42", "allergy: peanuts", nil),
		item(memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}, "message", "bob-lisbon", "Bob also lives in Lisbon", nil),
		item(memory.Identity{Tenant: "other", User: "alice", Conversation: "c1"}, "message", "tenant-lisbon", "Lisbon in another tenant", nil),
	)
}

// testSearchTextRanks covers full-text ranking: passages sharing words with
// the query rank above those that share none, extra query words do not stop
// a match, and Score never increases down the list.
func testSearchTextRanks(t *testing.T, s KnowledgeStore) {
	textFixture(t, s)
	tests := []struct {
		name  string
		query string
		first string
		only  []string // when set, the exact set of refs matched
	}{
		{"single word", "Lisbon", "lisbon", []string{"lisbon"}},
		{"case-insensitive", "LISBON", "lisbon", []string{"lisbon"}},
		{"question with extra words", "when did I move to Lisbon?", "lisbon", nil},
		{"goal question", "what is my savings goal?", "savings", nil},
		{"number", "R$ 5.000", "savings", []string{"savings"}},
		{"other conversation", "Porto marathon training", "marathon", nil},
		{"fact item", "any peanuts allergy", "42", []string{"42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: tt.query, Limit: 10})
			if len(got) == 0 || got[0].Ref != tt.first {
				t.Fatalf("SearchText(%q) = %q, want %q first", tt.query, refs(got), tt.first)
			}
			assertBestFirst(t, "SearchText", got)
			if tt.only != nil {
				assertRefs(t, "SearchText", got, tt.only)
			}
			if got[0].Text == "" || got[0].ID == 0 || got[0].User != "alice" || got[0].CreatedAt.IsZero() {
				t.Fatalf("SearchText result incomplete: %+v", got[0])
			}
		})
	}
	// A passage matching more of the query's words ranks above one matching fewer.
	c3 := memory.Identity{Tenant: "acme", User: "carol", Conversation: "c3"}
	mustAddItems(t, s,
		item(c3, "message", "one", "red apples in the basket today", nil),
		item(c3, "message", "two", "red apples and green pears in the basket", nil),
		item(c3, "message", "none", "a completely unrelated sentence", nil),
	)
	got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "carol", Text: "green pears", Limit: 10})
	assertRefs(t, "SearchText green pears", got, []string{"two"})
	got = mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "carol", Text: "apples pears", Limit: 10})
	if len(got) < 2 || got[0].Ref != "two" || got[1].Ref != "one" {
		t.Fatalf("SearchText(apples pears) = %q, want two then one", refs(got))
	}
	for _, it := range got {
		if it.Ref == "none" {
			t.Fatalf("SearchText(apples pears) returned a passage sharing no word: %q", refs(got))
		}
	}
}

// testSearchTextScope covers full-text scoping: user, tenant, conversation,
// excluded refs and limit.
func testSearchTextScope(t *testing.T, s KnowledgeStore) {
	textFixture(t, s)
	base := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Lisbon savings marathon peanuts weather", Limit: 10}
	tests := []struct {
		name   string
		modify func(q *memory.ItemQuery)
		want   []string // as a set
	}{
		{"user's items only", func(*memory.ItemQuery) {}, []string{"lisbon", "savings", "weather", "marathon", "42"}},
		{"one conversation", func(q *memory.ItemQuery) { q.Conversation = "c2" }, []string{"marathon"}},
		{"exclude refs", func(q *memory.ItemQuery) { q.ExcludeRefs = []string{"lisbon", "42"} }, []string{"savings", "weather", "marathon"}},
		{"other user", func(q *memory.ItemQuery) { q.User = "bob" }, []string{"bob-lisbon"}},
		{"other tenant", func(q *memory.ItemQuery) { q.Tenant = "other" }, []string{"tenant-lisbon"}},
		{"unknown user", func(q *memory.ItemQuery) { q.User = "nobody" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := base
			tt.modify(&q)
			got := refs(mustSearchText(t, s, q))
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
				t.Fatalf("SearchText = %q, want %q", got, want)
			}
		})
	}
	q := base
	q.Limit = 2
	if got := mustSearchText(t, s, q); len(got) != 2 {
		t.Fatalf("SearchText with limit 2 = %q", refs(got))
	}
}

// testSearchTextHostile feeds user text that is query syntax in most
// full-text engines: it must never fail, and the words in it still match.
func testSearchTextHostile(t *testing.T, s KnowledgeStore) {
	textFixture(t, s)
	tests := []struct {
		query string
		first string // "" when any (or no) result is fine
	}{
		{`what's "R$ 5.000"?`, "savings"},
		{`AND OR NOT (`, ""},
		{`NEAR(lisbon partner)`, "lisbon"},
		{`"unbalanced quote lisbon`, "lisbon"},
		{`savings*`, "savings"},
		{`text:lisbon`, "lisbon"},
		{`-weather +hike`, "weather"},
		{`^lisbon`, "lisbon"},
		{`{lisbon} [savings] <weather> | & ! : ; \ ' ''`, ""},
		{`?!... ---`, ""},
		{`   `, ""},
		{`'; DROP TABLE memory_items; --`, ""},
		{`Lisbon's café, São Paulo — 😀`, "lisbon"},
		{strings.Repeat("lisbon ", 300), "lisbon"},
	}
	for _, tt := range tests {
		name := tt.query
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: tt.query, Limit: 10})
			if tt.first != "" && (len(got) == 0 || got[0].Ref != tt.first) {
				t.Fatalf("SearchText(%q) = %q, want %q first", tt.query, refs(got), tt.first)
			}
			for _, it := range got {
				if it.User != "alice" {
					t.Fatalf("SearchText(%q) returned %s's item %s", tt.query, it.User, it.Ref)
				}
			}
		})
	}
	// The table survives the injection attempt.
	if got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Lisbon", Limit: 10}); len(got) != 1 {
		t.Fatalf("after hostile queries, SearchText(Lisbon) = %q", refs(got))
	}
}
