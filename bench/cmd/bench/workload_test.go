package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestUserMessage(t *testing.T) {
	if userMessage(3, 7) != userMessage(3, 7) {
		t.Error("the same turn differs between calls")
	}
	seen := map[string]bool{}
	for conn := range 4 {
		for seq := range 50 {
			m := userMessage(conn, seq)
			if n := len(strings.Fields(m)); n < 8 || n > 24 {
				t.Errorf("turn %d/%d has %d words: %q", conn, seq, n, m)
			}
			seen[m] = true
		}
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct messages in 200 turns", len(seen))
	}
	if len(vocabulary) != 70*70 {
		t.Errorf("vocabulary of %d words", len(vocabulary))
	}
}

func TestChatBody(t *testing.T) {
	tests := []struct {
		stream bool
	}{{false}, {true}}
	for _, tt := range tests {
		var body struct {
			Messages []struct{ Role, Content string }
			Stream   bool
		}
		if err := json.Unmarshal(chatBody(`say "hi" \ now`, tt.stream), &body); err != nil {
			t.Fatalf("stream=%v: %v", tt.stream, err)
		}
		if len(body.Messages) != 2 || body.Messages[1].Content != `say "hi" \ now` || body.Stream != tt.stream {
			t.Errorf("stream=%v: %+v", tt.stream, body)
		}
	}
}

func TestVarySustained(t *testing.T) {
	user := func(conn, seq int) string {
		_, h := varySustained(conn, seq)
		if h.Get("X-Memory-User") != h.Get("X-Memory-Conversation") {
			t.Errorf("user %q, conversation %q", h.Get("X-Memory-User"), h.Get("X-Memory-Conversation"))
		}
		return h.Get("X-Memory-User")
	}
	tests := []struct {
		name         string
		a, b         [2]int
		sameUserWant bool
	}{
		{"within one conversation", [2]int{0, 0}, [2]int{0, sustainedTurns - 1}, true},
		{"the next conversation", [2]int{0, sustainedTurns - 1}, [2]int{0, sustainedTurns}, false},
		{"another connection", [2]int{0, 5}, [2]int{1, 5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if same := user(tt.a[0], tt.a[1]) == user(tt.b[0], tt.b[1]); same != tt.sameUserWant {
				t.Errorf("same user = %v, want %v", same, tt.sameUserWant)
			}
		})
	}
}
