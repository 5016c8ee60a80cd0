package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testFactRestatedFromItsMessage covers a statement made again from the
// message that made it (the same Source and Rule): enrichment redelivered
// after it was done, whole or in part. It changes nothing — not the
// mentions, the confidence, the times nor which value is current — even
// after later statements of the key; a statement from another message, by
// another rule (a pin and an extraction of one message), or with no
// Source (the API) counts as ever.
func testFactRestatedFromItsMessage(t *testing.T, s KnowledgeStore) {
	type stated struct {
		value, source, rule string
		n                   int // seconds after baseTime
	}
	tests := []struct {
		name   string
		states []stated
		redo   []int // states stated again afterwards, by index
		value  string
		count  int // the current fact's mentions
	}{
		{"same message twice", []stated{{"Lisbon", "ex1:0", "", 0}}, []int{0}, "Lisbon", 1},
		{"after a later mention", []stated{{"Lisbon", "ex1:0", "", 0}, {"Lisbon", "ex2:0", "", 10}}, []int{0, 1}, "Lisbon", 2},
		{"after contradictions", []stated{{"Lisbon", "ex1:0", "", 0}, {"Porto", "ex2:0", "", 10}, {"Lisbon", "ex3:0", "", 20}}, []int{0, 1, 2}, "Lisbon", 1},
		{"out of order", []stated{{"Lisbon", "ex1:0", "", 0}, {"Porto", "ex2:0", "", 10}}, []int{1, 0}, "Porto", 1},
		{"another message", []stated{{"Lisbon", "ex1:0", "", 0}, {"Lisbon", "ex2:0", "", 0}}, nil, "Lisbon", 2},
		{"pinned and extracted", []stated{{"Lisbon", "ex1:0", "city", 0}, {"Lisbon", "ex1:0", "", 0}}, []int{0, 1}, "Lisbon", 2},
		{"no source", []stated{{"Lisbon", "", "", 0}, {"Lisbon", "", "", 0}}, nil, "Lisbon", 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user := "alice" + string(rune('a'+i))
			state := func(st stated) {
				f := fact("acme", user, memory.FactProfile, "city", st.value, st.n)
				f.Source, f.Rule, f.Pinned = st.source, st.rule, st.rule != ""
				mustUpsertFact(t, s, f, 0)
			}
			for _, st := range tt.states {
				state(st)
			}
			before := mustFacts(t, s, "acme", user, baseTime, true)
			for _, i := range tt.redo {
				state(tt.states[i])
			}
			after := mustFacts(t, s, "acme", user, baseTime, true)
			if !reflect.DeepEqual(after, before) {
				t.Errorf("stated again from the same messages: facts\n%+v\nwant unchanged\n%+v", after, before)
			}
			cur := mustFacts(t, s, "acme", user, baseTime, false)
			if len(cur) != 1 || cur[0].Value != tt.value || cur[0].Mentions != tt.count {
				t.Errorf("current facts = %+v, want %s with %d mentions", cur, tt.value, tt.count)
			}
		})
	}
}

// testDeleteConversationForgetsItsMentions covers a fact stated from a
// message of a conversation later deleted, and stated by another
// conversation too (so the fact stays): the conversation's messages stop
// counting as having stated it. Imported again with the same exchange ids
// (an import's ids derive from its content), the conversation states the
// fact anew, and the fact then outlives the other conversation's
// deletion. A mention left behind made the new statement look like a
// redelivery: it recorded nothing, and the fact went with the other
// conversation although the imported one still stated it.
func testDeleteConversationForgetsItsMentions(t *testing.T, s KnowledgeStore) {
	cx := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cx"}
	cy := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cy"}
	state := func(id memory.Identity, source string, n int) {
		t.Helper()
		f := fact(id.Tenant, id.User, memory.FactPreference, "drink", "tea", n)
		f.Conversation, f.Source, f.Rule, f.Pinned = id.Conversation, source, "preference", true
		mustUpsertFact(t, s, f, 0)
	}
	save := func(id memory.Identity) string {
		t.Helper()
		ex := simple(t, id, 1)
		ex.At = time.Now()
		res := mustSave(t, s, ex)
		if len(res.Stored) == 0 {
			t.Fatalf("save in %s stored nothing", id.Conversation)
		}
		return res.Stored[0].Key
	}
	fromX := save(cx)
	state(cx, fromX, 1)
	state(cy, save(cy), 2)
	if err := s.DeleteConversation(testCtx(t), cx); err != nil {
		t.Fatalf("DeleteConversation(cx): %v", err)
	}
	assertValues(t, "facts after deleting cx", mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), false), "tea")

	if again := save(cx); again != fromX {
		t.Fatalf("cx imported again stores %q, want the key it had, %q", again, fromX)
	}
	state(cx, fromX, 3)
	if err := s.DeleteConversation(testCtx(t), cy); err != nil {
		t.Fatalf("DeleteConversation(cy): %v", err)
	}
	assertValues(t, "facts after importing cx again and deleting cy", mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), false), "tea")
}
