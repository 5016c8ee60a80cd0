package memory

import "testing"

// TestBranchOf: a save finds the branch a request's history continues
// from the exchange alone — its BranchSeed and its non-system messages —
// as the request's own routing does from all its messages; the seed
// tells nothing of the system prompt and does not change with it (a
// client may send another one with every request), while
// LegacyBranchSeed, an earlier memgate's seed, does.
func TestBranchOf(t *testing.T) {
	m := func(role, content string) Message { return Message{Role: role, Content: content} }
	msgs := []Message{m("system", "You are helpful."), m("user", "hi"), m("assistant", "Hello!"), m("user", "plan a trip"), m("assistant", "Where?")}
	seed := BranchSeed("t", "u", msgs)
	for through := range 4 {
		if got, want := BranchOf(seed, msgs[1:], through), BranchConversation("t", "u", msgs, through); got != want {
			t.Fatalf("BranchOf(seed, history, %d) = %q, want BranchConversation's %q", through, got, want)
		}
	}
	terse := append([]Message{m("system", "Be terse.")}, msgs[1:]...)
	if other := BranchSeed("t", "u", terse); other != seed {
		t.Fatalf("BranchSeed changes with the system prompt")
	}
	if LegacyBranchSeed("t", "u", terse) == LegacyBranchSeed("t", "u", msgs) || LegacyBranchSeed("t", "u", msgs[1:]) != seed {
		t.Fatalf("LegacyBranchSeed ignores the system prompt, or differs from BranchSeed without one")
	}
	if len(seed) != 64 {
		t.Fatalf("BranchSeed = %q, want 64 hex digits", seed)
	}
}

// TestParts states where a client's history parts from a conversation's
// live messages: at the first index where both have a message and they
// differ, unless both are assistant messages.
func TestParts(t *testing.T) {
	m := func(role, content string) Message { return Message{Role: role, Content: content} }
	held := []Message{m("user", "hi"), m("assistant", "Hello!"), m("user", "plan a trip"), m("assistant", "Where?")}
	tests := []struct {
		name    string
		history []Message
		want    int
	}{
		{"going on", append(append([]Message(nil), held...), m("user", "Peru")), -1},
		{"regenerating", held[:3], -1},
		{"nothing held in common yet", nil, -1},
		{"a reply resent otherwise", []Message{held[0], m("assistant", "Hello! "), held[2]}, -1},
		{"another chat", []Message{held[0], held[1], m("user", "write a letter")}, 2},
		{"another chat answered otherwise", []Message{held[0], m("assistant", "Hey."), m("user", "write a letter")}, 2},
		{"the first message", []Message{m("user", " hi")}, 0},
		{"a role", []Message{held[0], m("user", "Hello!")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parts(held, tt.history); got != tt.want {
				t.Fatalf("Parts = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPrint: two messages' prints are equal exactly when their
// fingerprints are (whatever else differs), and part a history exactly
// when the messages do (Diverges).
func TestPrint(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "hi"}, {Role: "user", Content: "hi", Raw: []byte(`{"role":"user","content":"hi"}`), Key: "k"},
		{Role: "assistant", Content: "hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "hi "},
		{Role: "user\x00hi", Content: ""}, {Role: "tool", Content: "42"}, {},
	}
	for _, a := range msgs {
		for _, b := range msgs {
			if (a.Print() == b.Print()) != (a.Fingerprint() == b.Fingerprint()) {
				t.Fatalf("prints of %+v and %+v equal: %v", a, b, a.Print() == b.Print())
			}
			if a.Print().Diverges(b.Print()) != Diverges(a, b) {
				t.Fatalf("prints of %+v and %+v diverge: %v", a, b, !Diverges(a, b))
			}
		}
	}
}
