package storetest

import (
	"reflect"
	"testing"

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
