package memory

import (
	"strings"
	"testing"
)

func TestContinuesTail(t *testing.T) {
	u := func(s string) Message { return Message{Role: "user", Content: s} }
	a := func(s string) Message { return Message{Role: "assistant", Content: s} }
	held := []Message{u("q1"), a("a1"), u("q2"), a("a2")}
	for _, tt := range []struct {
		name   string
		held   []Message
		window []Message
		want   bool
	}{
		{"a cut at a reply", held, []Message{a("a1"), u("q2"), a("a2")}, true},
		{"a cut at a user message", held[1:], []Message{u("q2"), a("a2")}, true},
		{"the whole history is no cut", held, held, false},
		{"a window reaching the conversation's start is no cut", held[:3], []Message{a("a1"), u("q2"), a("a2")}, false},
		{"the reply alone", held[2:], []Message{a("a2")}, false},
		{"a long reply alone", []Message{u("q2"), a(strings.Repeat("a long reply ", 5))}, []Message{a(strings.Repeat("a long reply ", 5))}, true},
		{"a long reply alone, at the conversation's start", []Message{a(strings.Repeat("a long reply ", 5))}, []Message{a(strings.Repeat("a long reply ", 5))}, false},
		{"a reply just too short alone", []Message{u("q2"), a(strings.Repeat("x", 63))}, []Message{a(strings.Repeat("x", 63))}, false},
		{"no user message with text", []Message{a("a0"), u(""), a("a1")}, []Message{u(""), a("a1")}, false},
		{"a message differs", held, []Message{a("a1"), u("q2, edited"), a("a2")}, false},
		{"a role differs", held, []Message{u("a1"), u("q2"), a("a2")}, false},
		{"an empty window", held[:1], nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ContinuesTail(tt.held, tt.window); got != tt.want {
				t.Errorf("ContinuesTail = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewestReply(t *testing.T) {
	call := Message{Role: "assistant", Raw: []byte(`{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`)}
	for _, tt := range []struct {
		name string
		msgs []Message
		want int
	}{
		{"none", []Message{{Role: "user", Content: "q"}}, -1},
		{"the last reply", []Message{{Role: "assistant", Content: "a1"}, {Role: "user", Content: "q"}, {Role: "assistant", Content: "a2"}}, 2},
		{"a tool call's empty text is passed over", []Message{{Role: "assistant", Content: "a1"}, {Role: "user", Content: "q"}, call, {Role: "tool", Content: "r"}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewestReply(tt.msgs); got != tt.want {
				t.Errorf("NewestReply = %d, want %d", got, tt.want)
			}
		})
	}
}
