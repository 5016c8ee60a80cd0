package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
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

// TestMemoryTurnSpreadsConnections checks the conversations of a cell's
// turns: no two connections share one, a connection of a full cell keeps
// its own, and one connection over many conversations visits each in turn.
func TestMemoryTurnSpreadsConnections(t *testing.T) {
	user := func(h http.Header) string { return h.Get("X-Memory-User") }
	for _, tc := range []struct{ n, conns int }{{64, 1}, {64, 16}, {64, 64}, {64, 3}, {10, 64}} {
		owner := map[string]int{}
		for conn := range tc.conns {
			for seq := range 200 {
				h := memoryTurn("memgate-memory", tc.n, tc.conns, conn, seq)
				u := user(h)
				if h.Get("X-Memory-Conversation") != u {
					t.Fatalf("n %d conns %d: conversation %q for user %q", tc.n, tc.conns, h.Get("X-Memory-Conversation"), u)
				}
				if c, ok := owner[u]; ok && c != conn {
					t.Fatalf("n %d conns %d: %s used by connections %d and %d", tc.n, tc.conns, u, c, conn)
				}
				owner[u] = conn
			}
		}
		want := max(tc.n, tc.conns)
		if tc.n > tc.conns {
			want = tc.n / tc.conns * tc.conns
		}
		if len(owner) != want {
			t.Errorf("n %d conns %d: %d conversations used, want %d", tc.n, tc.conns, len(owner), want)
		}
	}
	if a, b := user(memoryTurn("memgate-memory", 64, 1, 0, 0)), user(memoryTurn("memgate-memory", 64, 1, 0, 1)); a == b {
		t.Errorf("one connection stayed on %s for two turns", a)
	}
}

// TestHistoryBody: a full-history chat's turn resends the chat's earlier
// turns, each answered with the reply given, before its new message; a new
// chat begins every turns turns, its first turn carrying no history, so
// every later turn of a chat derives the chat's one conversation.
func TestHistoryBody(t *testing.T) {
	const turns = 4
	convs := map[string]bool{}
	for seq := range 2 * turns {
		var req struct {
			Messages []memory.Message `json:"messages"`
			Stream   bool             `json:"stream"`
		}
		if err := json.Unmarshal(historyBody(2, 1000, seq, turns, "Hi.", true), &req); err != nil {
			t.Fatal(err)
		}
		k := seq % turns
		if len(req.Messages) != 2+2*k || !req.Stream || req.Messages[len(req.Messages)-1].Content != userMessage(2, 1000+seq) {
			t.Fatalf("turn %d: %d messages (stream %v), want %d ending with its own", seq, len(req.Messages), req.Stream, 2+2*k)
		}
		for i := 1; i < len(req.Messages)-1; i += 2 {
			if req.Messages[i].Content != userMessage(2, 1000+seq-k+i/2) || req.Messages[i+1].Content != "Hi." {
				t.Fatalf("turn %d: message %d is %q", seq, i, req.Messages[i].Content)
			}
		}
		conv := memory.ImpliedConversation("t", "u", req.Messages)
		if k == 0 {
			if conv != memory.DefaultConversation {
				t.Fatalf("a chat's first turn in %q", conv)
			}
			continue
		}
		convs[conv] = true
	}
	if len(convs) != 2 {
		t.Fatalf("two chats derived %d conversations", len(convs))
	}
}
