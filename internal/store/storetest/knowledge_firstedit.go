package storetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// testFirstMessageEdit: a named conversation's full-history client resends
// its history with the first message changed. When every message after
// the first is resent as stored (at least two, one of them the user's),
// the edit supersedes the stored branch from its first message, its recall
// items with it. Another chat sent under the same name, whose first reply
// happens to be the stored one's (a greeting: replies repeat across
// chats), is stored beside the branch, which stays live and recallable:
// nothing captured is lost to a coincidence.
func testFirstMessageEdit(t *testing.T, s KnowledgeStore) {
	m := func(role, text string) memory.Message { return msg(t, role, text) }
	const greeting = "Hello! How can I assist you today?"
	old := []memory.Message{m("user", "hi"), m("assistant", greeting),
		m("user", "My sister Mariana collects antique barometers."), m("assistant", "What a lovely hobby."),
		m("user", "What should I get her for her birthday?"), m("assistant", "A barometer stand.")}
	tests := []struct {
		name       string
		prior      []memory.Message
		turn       string
		superseded bool // the old branch goes
	}{
		{"EditWithTheRestResent", append([]memory.Message{m("user", "hello")}, old[1:]...), "Anything else she might like?", true},
		{"ReusedNameWithSameGreeting", []memory.Message{m("user", "hey"), m("assistant", greeting)}, "Plan a weekend in Porto.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := memory.Identity{Tenant: "acme", User: "alice", Conversation: tt.name}
			first := exchange(id, "old-"+tt.name, 1, old[:4], old[4:5], old[5])
			mustSave(t, s, first)
			barometers := memory.Key(first.ID, 2)
			mustAddItems(t, s, item(id, "message", barometers, "Mariana collects antique barometers", vec4(1, 0, 0, 0)))

			next := exchange(id, "new-"+tt.name, 2, tt.prior, []memory.Message{m("user", tt.turn)}, m("assistant", "ack: "+tt.turn))
			res := mustSave(t, s, next)
			added := append(slices.Clone(tt.prior), next.Turn[0], next.Reply)
			want, wantSuperseded := append(slices.Clone(old), added...), 0
			if tt.superseded {
				want, wantSuperseded = added, len(old)
			}
			if res.Superseded != wantSuperseded || res.Inserted != len(added) {
				t.Fatalf("saved %+v, want %d superseded and %d inserted", counts(res), wantSuperseded, len(added))
			}
			if got, w := strings.Join(contents(mustRecent(t, s, id, 100)), " | "), strings.Join(contents(want), " | "); got != w {
				t.Fatalf("conversation holds\n%s\nwant\n%s", got, w)
			}
			q := memory.ItemQuery{Tenant: "acme", User: "alice", Conversation: id.Conversation,
				Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Text: "barometers", Limit: 10}
			for name, got := range map[string][]memory.Item{"SearchVector": mustSearchVector(t, s, q), "SearchText": mustSearchText(t, s, q)} {
				if found := slices.Contains(refs(got), barometers); found == tt.superseded {
					t.Fatalf("%s finds the old branch's message: %v, want %v", name, found, !tt.superseded)
				}
			}
		})
	}
}
