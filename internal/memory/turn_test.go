package memory

import (
	"encoding/json"
	"testing"
)

// turnMsgs builds messages from role specs: "user", "assistant", "tool",
// and "call" for an assistant message with a tool call.
func turnMsgs(roles ...string) []Message {
	out := make([]Message, len(roles))
	for i, r := range roles {
		switch r {
		case "call":
			out[i] = Message{Role: "assistant", Raw: json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`)}
		case "legacy call":
			out[i] = Message{Role: "assistant", Raw: json.RawMessage(`{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}`)}
		default:
			out[i] = Message{Role: r, Raw: json.RawMessage(`{"role":"` + r + `","content":"x"}`)}
		}
	}
	return out
}

// TestSplitCurrentAndAnswered states both divisions of a client's
// non-system messages on the same inputs: the current turn (SplitCurrent:
// the user message(s) and the tool loop answering them) and the unanswered
// messages (SplitAnswered: what follows the last assistant message).
func TestSplitCurrentAndAnswered(t *testing.T) {
	tests := []struct {
		name    string
		roles   []string
		current int // len of SplitCurrent's current
		unans   int // len of SplitAnswered's unanswered
	}{
		{"empty", nil, 0, 0},
		{"only new user", []string{"user"}, 1, 1},
		{"two new users", []string{"user", "user"}, 2, 2},
		{"full history", []string{"user", "assistant", "user"}, 1, 1},
		{"full history, two users", []string{"user", "assistant", "user", "user"}, 2, 2},
		{"new-only tool loop", []string{"user", "call", "tool"}, 3, 1},
		{"new-only tool loop without its question", []string{"call", "tool"}, 2, 1},
		{"tool loop after history", []string{"user", "assistant", "user", "call", "tool", "tool"}, 4, 2},
		{"two rounds of a tool loop", []string{"user", "assistant", "user", "call", "tool", "call", "tool"}, 5, 1},
		{"legacy function call", []string{"user", "assistant", "user", "legacy call", "function"}, 3, 1},
		{"tool results after a plain assistant", []string{"user", "assistant", "tool"}, 1, 1},
		{"user after a finished tool loop", []string{"user", "call", "tool", "assistant", "user"}, 1, 1},
		{"user after tool results", []string{"user", "call", "tool", "user"}, 4, 2},
		{"new-only results with a question", []string{"tool", "user"}, 2, 2},
		{"new-only parallel results with a question", []string{"tool", "tool", "user"}, 3, 3},
		{"results with a question after history", []string{"user", "assistant", "user", "call", "tool", "user"}, 4, 2},
		{"user after an unanswered call", []string{"user", "call", "user"}, 1, 1},
		{"ends with the assistant", []string{"user", "assistant"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := turnMsgs(tt.roles...)
			earlier, current := SplitCurrent(in)
			if len(current) != tt.current || len(earlier)+len(current) != len(in) {
				t.Errorf("SplitCurrent: earlier %d, current %d; want current %d of %d", len(earlier), len(current), tt.current, len(in))
			}
			answered, unanswered := SplitAnswered(in)
			if len(unanswered) != tt.unans || len(answered)+len(unanswered) != len(in) {
				t.Errorf("SplitAnswered: answered %d, unanswered %d; want unanswered %d of %d", len(answered), len(unanswered), tt.unans, len(in))
			}
			for _, m := range unanswered {
				if m.Role == "assistant" {
					t.Errorf("unanswered holds an assistant message")
				}
			}
		})
	}
}

// TestImpliedConversation: a client that resends an earlier turn derives
// its conversation; one that sends only its current turn (a tool loop
// included) continues the user's default conversation.
func TestImpliedConversation(t *testing.T) {
	sys := Message{Role: "system", Content: "be brief"}
	tests := []struct {
		name  string
		roles []string
		want  string // "default" or "derived"
	}{
		{"new user message", []string{"user"}, "default"},
		{"new-only tool loop", []string{"user", "call", "tool"}, "default"},
		{"resent history", []string{"user", "assistant", "user"}, "derived"},
		{"resent history and a tool loop", []string{"user", "assistant", "user", "call", "tool"}, "derived"},
		{"new-only results with a question", []string{"tool", "user"}, "default"},
		{"resent history, results with a question", []string{"user", "assistant", "user", "call", "tool", "user"}, "derived"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := append([]Message{sys}, turnMsgs(tt.roles...)...)
			got := ImpliedConversation("t", "u", msgs)
			want := DefaultConversation
			if tt.want == "derived" {
				want = DerivedConversation("t", "u", msgs)
			}
			if got != want {
				t.Errorf("ImpliedConversation = %q, want %q", got, want)
			}
		})
	}
}

// TestBranchConversation states the id of a derived conversation's branch:
// in DerivedConversation's form, never equal to it, equal for requests
// that agree on the tenant, the user and the non-system messages through
// the index (whatever follows, whatever their Raw, whatever their system
// messages: a client may change its system prompt on every request),
// different when any of those differ.
func TestBranchConversation(t *testing.T) {
	m := func(role, content string) Message { return Message{Role: role, Content: content} }
	sys := m("system", "You are helpful.")
	base := []Message{sys, m("user", "hi"), m("assistant", "Hello!"), m("user", "plan a trip")}
	id := BranchConversation("t", "u", base, 2)
	tests := []struct {
		name    string
		tenant  string
		msgs    []Message
		through int
		same    bool
	}{
		{"itself", "t", base, 2, true},
		{"more messages after the index", "t", append(append([]Message(nil), base...), m("assistant", "Where?"), m("user", "Peru")), 2, true},
		{"another raw", "t", []Message{sys, {Role: "user", Content: "hi", Raw: json.RawMessage(`{"role":"user","content":"hi"}`)}, m("assistant", "Hello!"), m("user", "plan a trip")}, 2, true},
		{"system message moved", "t", []Message{m("user", "hi"), sys, m("assistant", "Hello!"), m("user", "plan a trip")}, 2, true},
		{"another tenant", "t2", base, 2, false},
		{"another system prompt", "t", []Message{m("system", "Be terse."), base[1], base[2], base[3]}, 2, true},
		{"no system prompt", "t", base[1:], 2, true},
		{"another message at the index", "t", []Message{sys, base[1], base[2], m("user", "write a letter")}, 2, false},
		{"another earlier message", "t", []Message{sys, base[1], m("assistant", "Hi!"), base[3]}, 2, false},
		{"another role", "t", []Message{sys, base[1], m("user", "Hello!"), base[3]}, 2, false},
		{"an index further", "t", append(append([]Message(nil), base...), m("assistant", "Where?")), 3, false},
		{"an index nearer", "t", base, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BranchConversation(tt.tenant, "u", tt.msgs, tt.through)
			if len(got) != len(id) || got[:5] != "chat-" {
				t.Fatalf("BranchConversation = %q, want chat- and 32 hex digits", got)
			}
			if (got == id) != tt.same {
				t.Fatalf("BranchConversation = %q, base %q: want same %v", got, id, tt.same)
			}
			if got == DerivedConversation(tt.tenant, "u", tt.msgs) {
				t.Fatalf("BranchConversation = DerivedConversation = %q", got)
			}
		})
	}
}
