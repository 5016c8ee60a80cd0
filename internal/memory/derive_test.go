package memory

import (
	"fmt"
	"testing"
)

// TestDerivationIgnoresSystemMessages: the conversation a header-less
// full-history request derives, its branches' ids and seed, and the
// candidate its first turn is recorded with hash the tenant, the user and
// the non-system history only. Real clients change their system prompt
// on every request (the current time, context retrieved for the turn, a
// lorebook entry, a profile block); were it hashed, every turn of such a
// chat would derive a conversation of its own and store the whole resent
// history again. The tenant, the user and the history still tell chats
// apart.
func TestDerivationIgnoresSystemMessages(t *testing.T) {
	m := func(role, content string) Message { return Message{Role: role, Content: content} }
	history := []Message{m("user", "hi"), m("assistant", "Hello!"), m("user", "plan a trip")}
	with := func(sys ...Message) []Message { return append(append([]Message(nil), sys...), history...) }
	base := with(m("system", "Current time: 2026-12-03 07:01"))
	variants := map[string][]Message{
		"the minute changed":       with(m("system", "Current time: 2026-12-03 07:02")),
		"retrieved context added":  with(m("system", "Current time: 2026-12-03 07:03"), m("system", "Context: the user likes Peru.")),
		"a developer message":      with(m("developer", "Answer in French.")),
		"no system prompt":         history,
		"a system message between": {history[0], m("system", "Lorebook: dragons"), history[1], history[2]},
	}
	derived := DerivedConversation("t", "u", base)
	seed := BranchSeed("t", "u", base)
	branch := BranchConversation("t", "u", base, 2)
	candidate := Candidate("t", "u", base[:2])
	if candidate != derived || ImpliedConversation("t", "u", base) != derived {
		t.Fatalf("candidate %q, implied %q, want the derived %q", candidate, ImpliedConversation("t", "u", base), derived)
	}
	for name, msgs := range variants {
		t.Run(name, func(t *testing.T) {
			first := msgs[:len(msgs)-2] // the request's first turn: its system messages and "hi"
			got := []string{DerivedConversation("t", "u", msgs), BranchSeed("t", "u", msgs), BranchConversation("t", "u", msgs, 2),
				Candidate("t", "u", first), ImpliedConversation("t", "u", msgs)}
			want := []string{derived, seed, branch, candidate, derived}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("derived, seed, branch, candidate, implied = %v, want %v", got, want)
			}
		})
	}
	others := map[string][3]string{
		"another tenant":        {"t2", "u", "hi"},
		"another user":          {"t", "u2", "hi"},
		"another first message": {"t", "u", "hello"},
	}
	for name, o := range others {
		t.Run(name, func(t *testing.T) {
			msgs := []Message{base[0], m("user", o[2]), history[1], history[2]}
			if DerivedConversation(o[0], o[1], msgs) == derived || BranchConversation(o[0], o[1], msgs, 2) == branch ||
				(o[2] == "hi") == (BranchSeed(o[0], o[1], msgs) == seed) { // the seed is the tenant's and user's
				t.Fatalf("%s derives what the base request derives", name)
			}
		})
	}
}

// TestLegacyConversation: the id an earlier memgate derived hashed the
// system and developer messages too; without any it is the id derived
// now, so such chats keep their conversation across the upgrade.
func TestLegacyConversation(t *testing.T) {
	m := func(role, content string) Message { return Message{Role: role, Content: content} }
	history := []Message{m("user", "hi"), m("assistant", "Hello!"), m("user", "plan a trip")}
	sys := append([]Message{m("system", "Be terse.")}, history...)
	if LegacyConversation("t", "u", history) != DerivedConversation("t", "u", history) {
		t.Fatal("without a system message the legacy id differs")
	}
	if LegacyConversation("t", "u", sys) == DerivedConversation("t", "u", sys) ||
		LegacyConversation("t", "u", sys) == LegacyConversation("t", "u", append([]Message{m("system", "Be kind.")}, history...)) {
		t.Fatal("the legacy id ignores the system prompt")
	}
	// What memgate before this change derived for that request.
	old := append([]Message{m("system", "Current time: 2026-12-03 07:01")}, history...)
	if got := LegacyConversation("t", "u", old); got != "chat-429acc6b057b7dc68dd62256ec73c02b" {
		t.Fatalf("LegacyConversation = %q, want the earlier id", got)
	}
	if got := LegacyBranchSeed("t", "u", old); got != "738edd9398488eedd05ae23d397c5906857c1cfef7ae590099b4f92b1cd300ef" {
		t.Fatalf("LegacyBranchSeed = %q, want the earlier seed", got)
	}
}
