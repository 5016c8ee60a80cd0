package storetest

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// confTolerance absorbs storing Confidence as a 4-byte float.
const confTolerance = 1e-5

// fact builds a fact stated at baseTime plus n seconds with confidence 0.5.
func fact(tenant, user string, typ memory.FactType, key, value string, n int) memory.Fact {
	at := baseTime.Add(time.Duration(n) * time.Second)
	return memory.Fact{
		Tenant: tenant, User: user, Type: typ, Key: key, Value: value,
		Confidence: 0.5, Mentions: 1, Conversation: "c1",
		CreatedAt: at, UpdatedAt: at,
	}
}

// mustUpsertFact upserts f and returns the current fact.
func mustUpsertFact(tb testing.TB, s Knowledge, f memory.Fact, maxPerUser int) memory.Fact {
	tb.Helper()
	got, err := s.UpsertFact(testCtx(tb), f, maxPerUser)
	if err != nil {
		tb.Fatalf("UpsertFact(%s=%s): %v", f.Key, f.Value, err)
	}
	if got.ID == 0 || got.Tenant != f.Tenant || got.User != f.User || got.Type != f.Type {
		tb.Fatalf("UpsertFact(%s=%s) returned %+v", f.Key, f.Value, got)
	}
	return got
}

// mustFacts lists a user's facts.
func mustFacts(tb testing.TB, s Knowledge, tenant, user string, now time.Time, history bool) []memory.Fact {
	tb.Helper()
	fs, err := s.Facts(testCtx(tb), tenant, user, now, history)
	if err != nil {
		tb.Fatalf("Facts(%s, %s): %v", tenant, user, err)
	}
	return fs
}

// values projects facts to their values, in order.
func values(fs []memory.Fact) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Value
	}
	return out
}

// assertValues compares facts by value, in order.
func assertValues(tb testing.TB, what string, fs []memory.Fact, want ...string) {
	tb.Helper()
	got := values(fs)
	if len(got) != len(want) {
		tb.Fatalf("%s = %q, want %q", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			tb.Fatalf("%s = %q, want %q", what, got, want)
		}
	}
}

// testFactSameValue covers restating a fact: one current fact whose Mentions
// grow by one and whose Confidence becomes max(old, new)+0.1, capped at 1.
func testFactSameValue(t *testing.T, s KnowledgeStore) {
	first := fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0)
	got := mustUpsertFact(t, s, first, 0)
	if got.Value != "Lisbon" || got.Mentions != 1 || math.Abs(got.Confidence-0.5) > confTolerance ||
		got.SupersededAt != nil || !got.CreatedAt.Equal(first.CreatedAt) || !got.UpdatedAt.Equal(first.UpdatedAt) || got.Conversation != "c1" {
		t.Fatalf("first UpsertFact = %+v", got)
	}
	steps := []struct {
		confidence float64
		conv       string
		mentions   int
		want       float64
	}{
		{0.3, "c2", 2, 0.6},   // max(0.5, 0.3) + 0.1
		{0.85, "c3", 3, 0.95}, // max(0.6, 0.85) + 0.1
		{0.2, "c3", 4, 1.0},   // 0.95 + 0.1, capped
		{0.9, "c4", 5, 1.0},
	}
	for i, st := range steps {
		again := fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 10*(i+1))
		again.Confidence, again.Conversation = st.confidence, st.conv
		up := mustUpsertFact(t, s, again, 0)
		if up.ID != got.ID {
			t.Fatalf("step %d: restated fact has ID %d, want the same fact %d", i, up.ID, got.ID)
		}
		if up.Mentions != st.mentions || math.Abs(up.Confidence-st.want) > confTolerance {
			t.Fatalf("step %d: mentions=%d confidence=%v, want %d and %v", i, up.Mentions, up.Confidence, st.mentions, st.want)
		}
		if !up.UpdatedAt.Equal(again.UpdatedAt) || !up.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("step %d: created %v updated %v, want created %v updated %v", i, up.CreatedAt, up.UpdatedAt, first.CreatedAt, again.UpdatedAt)
		}
		if up.Conversation != st.conv {
			t.Fatalf("step %d: Conversation = %q, want where it was last stated %q", i, up.Conversation, st.conv)
		}
	}
	all := mustFacts(t, s, "acme", "alice", baseTime, true)
	if len(all) != 1 || all[0].ID != got.ID || all[0].Mentions != 5 {
		t.Fatalf("history after restating = %+v, want one fact with 5 mentions", all)
	}
}

// testFactContradiction covers a different value for the same key: the old
// fact is superseded at the new fact's UpdatedAt and kept in history.
func testFactContradiction(t *testing.T, s KnowledgeStore) {
	old := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 1), 0)
	moved := fact("acme", "alice", memory.FactProfile, "city", "Porto", 60)
	moved.Confidence = 0.7
	cur := mustUpsertFact(t, s, moved, 0)
	if cur.ID == old.ID || cur.Value != "Porto" || cur.Mentions != 1 || math.Abs(cur.Confidence-0.7) > confTolerance || cur.SupersededAt != nil {
		t.Fatalf("contradicting UpsertFact = %+v, want a new current fact Porto with 1 mention", cur)
	}
	current := mustFacts(t, s, "acme", "alice", baseTime, false)
	assertValues(t, "current facts", current, "Porto")
	if current[0].ID != cur.ID {
		t.Fatalf("current fact ID = %d, want %d", current[0].ID, cur.ID)
	}
	history := mustFacts(t, s, "acme", "alice", baseTime, true)
	if len(history) != 2 {
		t.Fatalf("history = %+v, want Porto and Lisbon", history)
	}
	var superseded memory.Fact
	for _, f := range history {
		if f.ID == old.ID {
			superseded = f
		}
	}
	if superseded.Value != "Lisbon" || superseded.Mentions != 2 || superseded.SupersededAt == nil || !superseded.SupersededAt.Equal(moved.UpdatedAt) {
		t.Fatalf("superseded fact = %+v, want Lisbon with 2 mentions superseded at %v", superseded, moved.UpdatedAt)
	}
	if superseded.Current(baseTime.Add(time.Hour)) {
		t.Fatalf("superseded fact reports Current")
	}
	// Going back to the first value supersedes Porto and makes a new current fact.
	back := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 120), 0)
	if back.ID == old.ID || back.ID == cur.ID || back.Mentions != 1 {
		t.Fatalf("reverting UpsertFact = %+v, want a third fact", back)
	}
	assertValues(t, "current facts after revert", mustFacts(t, s, "acme", "alice", baseTime, false), "Lisbon")
	if n := len(mustFacts(t, s, "acme", "alice", baseTime, true)); n != 3 {
		t.Fatalf("history has %d facts, want 3", n)
	}
}

// testFactStatedEarlier: a value stated before the current one's latest
// statement — a user's backlog enriched out of order by two workers, or
// history imported or dated in the past — does not supersede it: the
// later statement stays current, and UpsertFact returns it. The same value
// restated earlier counts a mention and leaves UpdatedAt at the later one.
func testFactStatedEarlier(t *testing.T, s KnowledgeStore) {
	moved := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Porto", 60), 0)
	got := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 30), 0)
	if got.ID != moved.ID || got.Value != "Porto" || got.SupersededAt != nil {
		t.Fatalf("UpsertFact of an earlier statement = %+v, want the current Porto (%d)", got, moved.ID)
	}
	assertValues(t, "current facts", mustFacts(t, s, "acme", "alice", baseTime, false), "Porto")
	again := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Porto", 10), 0)
	if again.ID != moved.ID || again.Mentions != 2 || !again.UpdatedAt.Equal(moved.UpdatedAt) {
		t.Fatalf("earlier restatement = %+v, want fact %d with 2 mentions, updated at %v", again, moved.ID, moved.UpdatedAt)
	}
	// A later statement still supersedes it.
	assertValues(t, "current facts", []memory.Fact{mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Braga", 90), 0)}, "Braga")
	assertValues(t, "current facts", mustFacts(t, s, "acme", "alice", baseTime, false), "Braga")
}

// testFactNormalisedKey covers key normalisation (case and whitespace) and
// that facts are kept per type: the same key under another type is another fact.
func testFactNormalisedKey(t *testing.T, s KnowledgeStore) {
	first := mustUpsertFact(t, s, fact("acme", "alice", memory.FactGoal, "Savings Goal", "R$ 5.000", 0), 0)
	tests := []struct {
		key string
	}{
		{"savings goal"},
		{"  SAVINGS   goal "},
		{"savings\tGoal"},
	}
	for i, tt := range tests {
		got := mustUpsertFact(t, s, fact("acme", "alice", memory.FactGoal, tt.key, "R$ 5.000", i+1), 0)
		if got.ID != first.ID || got.Mentions != i+2 {
			t.Fatalf("key %q: fact %d with %d mentions, want fact %d with %d", tt.key, got.ID, got.Mentions, first.ID, i+2)
		}
	}
	changed := mustUpsertFact(t, s, fact("acme", "alice", memory.FactGoal, "SAVINGS GOAL", "R$ 8.000", 10), 0)
	if changed.ID == first.ID {
		t.Fatalf("a different value under a differently spelled key did not supersede")
	}
	other := mustUpsertFact(t, s, fact("acme", "alice", memory.FactDecision, "savings goal", "save monthly", 11), 0)
	if other.ID == changed.ID {
		t.Fatalf("same key under another type merged into the goal fact")
	}
	assertValues(t, "current facts", mustFacts(t, s, "acme", "alice", baseTime, false), "save monthly", "R$ 8.000")
}

// testFactPinnedSticky covers Pinned: once pinned, restating without the pin
// or contradicting the value keeps the key pinned.
func testFactPinnedSticky(t *testing.T, s KnowledgeStore) {
	f := fact("acme", "alice", memory.FactLimit, "allergy", "peanuts", 0)
	if got := mustUpsertFact(t, s, f, 0); got.Pinned {
		t.Fatalf("unpinned fact came back pinned")
	}
	f.Pinned, f.UpdatedAt = true, f.UpdatedAt.Add(time.Second)
	if got := mustUpsertFact(t, s, f, 0); !got.Pinned {
		t.Fatalf("pinning restatement = %+v, want pinned", got)
	}
	f.Pinned, f.UpdatedAt = false, f.UpdatedAt.Add(time.Second)
	if got := mustUpsertFact(t, s, f, 0); !got.Pinned || got.Mentions != 3 {
		t.Fatalf("unpinned restatement = %+v, want still pinned with 3 mentions", got)
	}
	changed := fact("acme", "alice", memory.FactLimit, "allergy", "shellfish", 10)
	if got := mustUpsertFact(t, s, changed, 0); !got.Pinned || got.Value != "shellfish" {
		t.Fatalf("contradiction of a pinned fact = %+v, want shellfish, still pinned", got)
	}
}

// testFactCapPerUser covers maxPerUser: beyond it, the unpinned current facts
// with the fewest mentions, oldest first, are deleted; pinned ones never are.
func testFactCapPerUser(t *testing.T, s KnowledgeStore) {
	const maxFacts = 3
	pinned := fact("acme", "alice", memory.FactLimit, "allergy", "peanuts", 0)
	pinned.Pinned = true
	mustUpsertFact(t, s, pinned, maxFacts)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "a", "A", 1), maxFacts)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "b", "B", 2), maxFacts)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "b", "B", 3), maxFacts) // B: 2 mentions
	// Another user's facts never count towards alice's cap.
	for i, k := range []string{"x", "y", "z", "w"} {
		mustUpsertFact(t, s, fact("acme", "bob", memory.FactProfile, k, k, i), 0)
	}
	assertValues(t, "at the cap", mustFacts(t, s, "acme", "alice", baseTime, false), "B", "A", "peanuts")

	// C makes four: A (1 mention, oldest unpinned) goes.
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "c", "C", 4), maxFacts)
	assertValues(t, "after C", mustFacts(t, s, "acme", "alice", baseTime, false), "C", "B", "peanuts")
	// D makes four again: C (1 mention) goes before B (2 mentions).
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "d", "D", 5), maxFacts)
	assertValues(t, "after D", mustFacts(t, s, "acme", "alice", baseTime, false), "D", "B", "peanuts")
	if n := len(mustFacts(t, s, "acme", "bob", baseTime, false)); n != 4 {
		t.Fatalf("bob has %d facts after alice's evictions, want 4", n)
	}
	// maxPerUser <= 0 means no cap.
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "e", "E", 6), 0)
	if n := len(mustFacts(t, s, "acme", "alice", baseTime, false)); n != 4 {
		t.Fatalf("alice has %d facts after an uncapped upsert, want 4", n)
	}
}

// testFactExpiry covers ExpiresAt: a fact expired at now is not current but
// is in history.
func testFactExpiry(t *testing.T, s KnowledgeStore) {
	now := baseTime.Add(time.Hour)
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	trip := fact("acme", "alice", memory.FactEvent, "trip", "Rome in May", 0)
	trip.ExpiresAt = &past
	mustUpsertFact(t, s, trip, 0)
	exam := fact("acme", "alice", memory.FactEvent, "exam", "exam on Friday", 1)
	exam.ExpiresAt = &future
	mustUpsertFact(t, s, exam, 0)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 2), 0)

	assertValues(t, "current at now", mustFacts(t, s, "acme", "alice", now, false), "Lisbon", "exam on Friday")
	assertValues(t, "current later", mustFacts(t, s, "acme", "alice", future.Add(time.Second), false), "Lisbon")
	assertValues(t, "current earlier", mustFacts(t, s, "acme", "alice", past.Add(-time.Second), false), "Lisbon", "exam on Friday", "Rome in May")
	history := mustFacts(t, s, "acme", "alice", now, true)
	assertValues(t, "history at now", history, "Lisbon", "exam on Friday", "Rome in May")
	for _, f := range history {
		if f.Value == "Rome in May" && (f.ExpiresAt == nil || !f.ExpiresAt.Equal(past)) {
			t.Fatalf("expired fact ExpiresAt = %v, want %v", f.ExpiresAt, past)
		}
	}
}

// testFactOrder covers Facts ordering (most recently updated first) and the
// fields it returns.
func testFactOrder(t *testing.T, s KnowledgeStore) {
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactPreference, "drink", "tea", 1), 0)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactGoal, "goal", "run a marathon", 2), 0)
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 3), 0)
	got := mustFacts(t, s, "acme", "alice", baseTime, false)
	assertValues(t, "facts", got, "Lisbon", "run a marathon", "tea")
	want := memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactGoal, Key: "goal", Value: "run a marathon", Mentions: 1, Conversation: "c1"}
	g := got[1]
	if g.Tenant != want.Tenant || g.User != want.User || g.Type != want.Type || g.Key != want.Key ||
		g.Mentions != want.Mentions || g.Conversation != want.Conversation || g.Pinned ||
		math.Abs(g.Confidence-0.5) > confTolerance || !g.CreatedAt.Equal(baseTime.Add(2*time.Second)) {
		t.Fatalf("fact = %+v, want %+v", g, want)
	}
	if none := mustFacts(t, s, "acme", "nobody", baseTime, true); len(none) != 0 {
		t.Fatalf("unknown user has facts %+v", none)
	}
}

func testDeleteFact(t *testing.T, s KnowledgeStore) {
	f := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	keep := mustUpsertFact(t, s, fact("acme", "alice", memory.FactPreference, "drink", "tea", 1), 0)
	tests := []struct {
		name         string
		tenant, user string
		id           int64
	}{
		{"another user", "acme", "bob", f.ID},
		{"another tenant", "other", "alice", f.ID},
		{"unknown id", "acme", "alice", f.ID + keep.ID + 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.DeleteFact(testCtx(t), tt.tenant, tt.user, tt.id); !errors.Is(err, memory.ErrNotFound) {
				t.Fatalf("DeleteFact = %v, want memory.ErrNotFound", err)
			}
			if n := len(mustFacts(t, s, "acme", "alice", baseTime, false)); n != 2 {
				t.Fatalf("alice has %d facts, want 2", n)
			}
		})
	}
	if err := s.DeleteFact(testCtx(t), "acme", "alice", f.ID); err != nil {
		t.Fatalf("DeleteFact: %v", err)
	}
	assertValues(t, "after delete", mustFacts(t, s, "acme", "alice", baseTime, true), "tea")
	if err := s.DeleteFact(testCtx(t), "acme", "alice", f.ID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("second DeleteFact = %v, want memory.ErrNotFound", err)
	}
	// The key is free again: stating it makes a fresh fact with one mention.
	again := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 5), 0)
	if again.ID == f.ID || again.Mentions != 1 {
		t.Fatalf("UpsertFact after delete = %+v, want a new fact with 1 mention", again)
	}
}

// testFactTenantIsolation covers the same user id and key under two tenants:
// separate facts, separate histories, separate deletes.
func testFactTenantIsolation(t *testing.T, s KnowledgeStore) {
	a := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	b := mustUpsertFact(t, s, fact("other", "alice", memory.FactProfile, "city", "Lisbon", 1), 0)
	if a.ID == b.ID || b.Mentions != 1 {
		t.Fatalf("same fact in two tenants merged: %+v and %+v", a, b)
	}
	mustUpsertFact(t, s, fact("other", "alice", memory.FactProfile, "city", "Porto", 2), 0)
	assertValues(t, "acme facts", mustFacts(t, s, "acme", "alice", baseTime, true), "Lisbon")
	assertValues(t, "other facts", mustFacts(t, s, "other", "alice", baseTime, false), "Porto")
	if err := s.DeleteUser(testCtx(t), "other", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	assertValues(t, "acme facts after erasing other/alice", mustFacts(t, s, "acme", "alice", baseTime, true), "Lisbon")
	assertValues(t, "other facts after erasure", mustFacts(t, s, "other", "alice", baseTime, true))
}

// testFactItemsFollowTheirFact covers the recall items made from facts (kind
// "fact", Ref = the fact's id): superseding, evicting or deleting a fact
// removes its item from search, so a fact that is no longer true is never
// recalled. Items of current facts stay.
func testFactItemsFollowTheirFact(t *testing.T, s KnowledgeStore) {
	owner := memory.Identity{Tenant: "acme", User: "alice"}
	state := func(key, value string, n, maxPerUser int) memory.Fact {
		t.Helper()
		f := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, key, value, n), maxPerUser)
		mustAddItems(t, s, item(owner, "fact", strconv.FormatInt(f.ID, 10), key+": "+value, vec4(1, float32(n), 0, 0)))
		return f
	}
	search := func(text string) []string {
		t.Helper()
		var out []string
		for _, it := range mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: text, Limit: 10}) {
			out = append(out, it.Text)
		}
		slices.Sort(out)
		return out
	}
	// Bob's item under the same fact-id ref space is never touched.
	bobFact := mustUpsertFact(t, s, fact("acme", "bob", memory.FactProfile, "city", "Lisbon", 0), 0)
	mustAddItems(t, s, item(memory.Identity{Tenant: "acme", User: "bob"}, "fact", strconv.FormatInt(bobFact.ID, 10), "city: Lisbon", vec4(1, 0, 0, 0)))

	state("city", "Lisbon", 0, 0)
	porto := state("city", "Porto", 1, 0)
	if got := search("city Lisbon Porto"); !slices.Equal(got, []string{"city: Porto"}) {
		t.Fatalf("after moving to Porto, search = %q, want only the current fact", got)
	}
	state("drink", "tea", 2, 0)
	state("food", "fish", 3, 2) // two current facts allowed: Porto (oldest, 1 mention) is evicted
	if got := search("city Porto"); len(got) != 0 {
		t.Fatalf("after the cap evicted Porto, search = %q, want nothing", got)
	}
	if err := s.DeleteFact(testCtx(t), "acme", "alice", porto.ID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteFact of an evicted fact = %v, want memory.ErrNotFound", err)
	}
	current := mustFacts(t, s, "acme", "alice", baseTime, false)
	assertValues(t, "current facts", current, "fish", "tea")
	if err := s.DeleteFact(testCtx(t), "acme", "alice", current[0].ID); err != nil {
		t.Fatalf("DeleteFact: %v", err)
	}
	if got := search("city food fish drink tea"); !slices.Equal(got, []string{"drink: tea"}) {
		t.Fatalf("after DeleteFact, search = %q, want only the tea fact", got)
	}
	vec := mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Limit: 10})
	assertRefs(t, "SearchVector of fact items", vec, []string{strconv.FormatInt(current[1].ID, 10)})
	bob := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "bob", Text: "city Lisbon", Limit: 10})
	assertRefs(t, "bob's fact items", bob, []string{strconv.FormatInt(bobFact.ID, 10)})
}

// testFactRuleAndSource covers Rule and Source (why a fact is pinned and
// the message it was stated in): stored with the fact and read back by
// UpsertFact and Facts; a restatement that names them replaces them, one
// that names none (a model's extraction, the API) keeps them; a new value
// carries its own.
func testFactRuleAndSource(t *testing.T, s KnowledgeStore) {
	f := fact("acme", "alice", memory.FactLimit, "diet", "I'm vegetarian", 0)
	f.Pinned, f.Rule, f.Source = true, "diet", "ex1:0"
	if got := mustUpsertFact(t, s, f, 0); got.Rule != "diet" || got.Source != "ex1:0" {
		t.Fatalf("upserted %+v, want rule diet and source ex1:0", got)
	}
	again := f
	again.Rule, again.Source, again.UpdatedAt = "", "", f.UpdatedAt.Add(time.Second)
	if got := mustUpsertFact(t, s, again, 0); got.Rule != "diet" || got.Source != "ex1:0" || got.Mentions != 2 {
		t.Fatalf("restated without rule or source: %+v, want them kept", got)
	}
	again.Rule, again.Source, again.Conversation, again.UpdatedAt = "diet", "ex7:2", "c2", again.UpdatedAt.Add(time.Second)
	if got := mustUpsertFact(t, s, again, 0); got.Source != "ex7:2" || got.Conversation != "c2" {
		t.Fatalf("restated elsewhere: %+v, want source ex7:2 in c2", got)
	}
	changed := again
	changed.Value, changed.Source, changed.UpdatedAt = "I'm vegan now", "ex9:0", again.UpdatedAt.Add(time.Second)
	mustUpsertFact(t, s, changed, 0)
	plain := fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 5)
	mustUpsertFact(t, s, plain, 0)
	fs, err := s.Facts(testCtx(t), "acme", "alice", baseTime.Add(time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, f := range fs {
		got[f.Value] = [2]string{f.Rule, f.Source}
	}
	want := map[string][2]string{
		"I'm vegetarian": {"diet", "ex7:2"}, "I'm vegan now": {"diet", "ex9:0"}, "Lisbon": {"", ""},
	}
	for v, w := range want {
		if got[v] != w {
			t.Errorf("fact %q: rule and source %q, want %q (all: %v)", v, got[v], w, got)
		}
	}
}
