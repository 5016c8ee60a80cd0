package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// headerUserChat sends one chat completion naming its user only in
// X-Memory-User and returns the conversation memgate answered with.
func headerUserChat(t *testing.T, url, who string, msgs []map[string]any) string {
	t.Helper()
	r := chat(t, url, map[string]string{"X-Memory-User": who}, false, msgs...)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return r.Header.Get("X-Memory-Conversation")
}

// waitConversation waits until the management API lists conv of who
// with exactly want as its messages ("role: content").
func waitConversation(t *testing.T, url, who, conv string, want []string) {
	t.Helper()
	eventually(t, conv+" stored as "+strings.Join(want, " | "), func() bool {
		var c struct {
			Messages []memory.Message `json:"messages"`
		}
		if apiCall(t, http.MethodGet, url+"/v1/memory/conversations/"+conv+"?user="+who, nil, nil, &c) != 200 {
			return false
		}
		var got []string
		for _, m := range c.Messages {
			got = append(got, m.Role+": "+m.Content)
		}
		return strings.Join(got, "\n") == strings.Join(want, "\n")
	})
}

// TestNewChatFirstTurnGetsNoDefaultHistory: through `gateway serve`, a
// user whose app resends its history (chat A, two turns) starts new
// chats, each sent as [system, question]: they land in the default
// conversation, yet chat B's request goes upstream without chat C's
// one-question exchange (still in default) as its history, and chat B's
// second turn takes its first into its own conversation. Deleting a
// conversation of the user drops what was learned. A user never
// seen resending (newest-only) still gets default's recent turns.
func TestNewChatFirstTurnGetsNoDefaultHistory(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	url, _ := mustServe(t, up)
	sys := map[string]any{"role": "system", "content": "You are terse."}
	const ana = "ana"

	a1, a2 := "Chat A: plan a trip to Rome.", "Chat A: three days."
	if c := headerUserChat(t, url, ana, []map[string]any{sys, user(a1)}); c != memory.DefaultConversation {
		t.Fatalf("chat A's first turn in %q, want default", c)
	}
	chatA := headerUserChat(t, url, ana, []map[string]any{sys, user(a1), assistant("ack: " + a1), user(a2)})
	if chatA == memory.DefaultConversation {
		t.Fatal("chat A's second turn in default, want a derived conversation")
	}

	// Chat C: one question, which stays in default.
	c1 := "Chat C: what is a good name for a cat?"
	if c := headerUserChat(t, url, ana, []map[string]any{sys, user(c1)}); c != memory.DefaultConversation {
		t.Fatalf("chat C in %q, want default", c)
	}
	waitConversation(t, url, ana, memory.DefaultConversation, []string{"user: " + c1, "assistant: ack: " + c1})

	b1, b2 := "Chat B: help me bake bread.", "Chat B: sourdough."
	if c := headerUserChat(t, url, ana, []map[string]any{sys, user(b1)}); c != memory.DefaultConversation {
		t.Fatalf("chat B's first turn in %q, want default", c)
	}
	if got := upstreamTexts(t, up); strings.Join(got, "\n") != strings.Join([]string{"system: You are terse.", "user: " + b1}, "\n") {
		t.Fatalf("chat B's first request went upstream as\n%s\nwant only its system prompt and question", strings.Join(got, "\n"))
	}
	chatB := headerUserChat(t, url, ana, []map[string]any{sys, user(b1), assistant("ack: " + b1), user(b2)})
	if chatB == memory.DefaultConversation || chatB == chatA {
		t.Fatalf("chat B's second turn in %q (chat A: %q), want its own conversation", chatB, chatA)
	}
	waitConversation(t, url, ana, chatB, []string{"user: " + b1, "assistant: ack: " + b1, "user: " + b2, "assistant: ack: " + b2})

	// Deleting a conversation drops what was learned of the user: their
	// next request in default is taken for a newest-only client's again.
	if code := apiCall(t, http.MethodDelete, url+"/v1/memory/conversations/"+chatA+"?user="+ana, nil, nil, nil); code != http.StatusOK {
		t.Fatalf("DELETE conversation: %d", code)
	}
	d1 := "Chat D: what is the capital of Peru?"
	headerUserChat(t, url, ana, []map[string]any{sys, user(d1)})
	if got := upstreamTexts(t, up); !slices.Contains(got, "user: "+c1) {
		t.Fatalf("after the delete, a request in default went upstream as\n%s\nwant default's recent turns before it", strings.Join(got, "\n"))
	}

	// A newest-only user still gets default's recent turns.
	const solo = "solo"
	headerUserChat(t, url, solo, []map[string]any{user("note 0")})
	waitConversation(t, url, solo, memory.DefaultConversation, []string{"user: note 0", "assistant: ack: note 0"})
	headerUserChat(t, url, solo, []map[string]any{user("note 1")})
	if got := upstreamTexts(t, up); strings.Join(got, "\n") != strings.Join([]string{"user: note 0", "assistant: ack: note 0", "user: note 1"}, "\n") {
		t.Fatalf("newest-only turn went upstream as\n%s\nwant default's recent turns before it", strings.Join(got, "\n"))
	}
}
