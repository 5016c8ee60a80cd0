package memory

import (
	"testing"
)

func TestCandidate(t *testing.T) {
	sys := Message{Role: "system", Content: "You are terse."}
	u1 := Message{Role: "user", Content: "Hi"}
	a1 := Message{Role: "assistant", Content: "Hello"}
	u2 := Message{Role: "user", Content: "Bye"}
	first := Candidate("t", "u", []Message{sys, u1})
	if first == "" || first != DerivedConversation("t", "u", []Message{sys, u1, a1, u2}) {
		t.Fatalf("first turn's candidate %q, want what its continuation derives", first)
	}
	if c := Candidate("t", "u", []Message{sys, u1, a1, u2}); c != "" {
		t.Fatalf("a continuation has candidate %q, want none", c)
	}
	// The system prompt is not the chat's: one that changes on every
	// request (the current time, say) keeps the candidate.
	if Candidate("t", "u", []Message{u1}) != first {
		t.Fatal("another system prompt gives another candidate")
	}
	if Candidate("t", "u", []Message{sys, u2}) == first {
		t.Fatal("another first message gives the same candidate")
	}
}

func TestAdoptable(t *testing.T) {
	m := func(key, role, content string) Message { return Message{Key: key, Role: role, Content: content} }
	stored := []Message{
		m("ex-1:0", "user", "Hi"), m("ex-1:1", "assistant", "Hello"),
		m("ex-2:0", "user", "Weather?"), m("ex-2:1", "assistant", "calling"), m("ex-2:2", "tool", "sunny"),
		m("ex-3:0", "user", "Other chat"), m("ex-3:1", "assistant", "Sure"),
	}
	p := func(ms ...Message) []Message { return ms }
	tests := []struct {
		name   string
		stored []Message
		prior  []Message
		want   int
	}{
		{"first exchange", stored, p(stored[0], stored[1]), 2},
		{"whole exchanges only", stored, p(stored[0], stored[1], stored[2], stored[3]), 2},
		{"several exchanges", stored, stored[:5], 5},
		{"reply differs", stored, p(stored[0], m("", "assistant", "Hey")), 0},
		{"prior shorter than the first exchange", stored, p(stored[0]), 0},
		{"prior ends inside a tool loop", stored[2:], p(stored[2], stored[3]), 0},
		{"stored ends with the match", stored[:2], p(stored[0], stored[1]), 2},
		{"nothing stored", nil, p(stored[0]), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Adoptable(tt.stored, tt.prior); got != tt.want {
				t.Fatalf("Adoptable = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestCandidateOf: a save records a first turn with its Candidate, and a
// continuation that started a branch of its chat (its first message at
// Seq 1) with its Root; nothing for a save that stored nothing, nor for
// a branch's later turns.
func TestCandidateOf(t *testing.T) {
	prior := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}
	stored := func(seq int64) SaveResult { return SaveResult{Inserted: 1, Stored: []Message{{Seq: seq}}} }
	for _, tt := range []struct {
		name string
		ex   Exchange
		res  SaveResult
		want string
	}{
		{"first turn", Exchange{Candidate: "chat-a"}, stored(1), "chat-a"},
		{"first turn again", Exchange{Candidate: "chat-a"}, SaveResult{Duplicate: true}, "chat-a"},
		{"first turn dropped", Exchange{Candidate: "chat-a"}, SaveResult{Dropped: true}, ""},
		{"branch started", Exchange{Root: "chat-a", Prior: prior}, stored(1), "chat-a"},
		{"branch continued", Exchange{Root: "chat-a", Prior: prior}, stored(3), ""},
		{"branch refused", Exchange{Root: "chat-a", Prior: prior}, SaveResult{Parted: true}, ""},
		{"no history", Exchange{Root: "chat-a"}, stored(1), ""},
		{"plain turn", Exchange{}, stored(1), ""},
	} {
		if got := CandidateOf(tt.ex, tt.res); got != tt.want {
			t.Errorf("%s: CandidateOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}
