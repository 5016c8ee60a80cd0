package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestFirstQuestionKeepsBlockInEveryConversation: a full-history chat's
// second prompt repeats its first, the first question's recalled block in
// place, whatever conversation the chat is in: one it names
// (X-Memory-Conversation), and a branch. Two headerless chats of one user
// open with the same question; the first keeps the conversation its
// history derives, the second, going on differently, is routed to a
// branch of it, where the block its first request kept for the derived
// conversation is found.
func TestFirstQuestionKeepsBlockInEveryConversation(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte // the chats' upstream requests, not the side model's
	)
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(extractionMarker)) && !bytes.Contains(body, []byte(`"response_format"`)) {
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
		}
		recallUpstream().ServeHTTP(w, r)
	}))
	gw := serveDialects(t, up.URL(), up.URL())
	if r := chat(t, gw, map[string]string{"X-Memory-User": "ana", "X-Memory-Conversation": "facts"}, false,
		user("My dog is called Rex and he loves the beach.")); r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	searchable(t, gw, "the statement", "dog Rex beach", "Rex")
	last := func() []json.RawMessage {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(bodies[len(bodies)-1], &req); err != nil {
			t.Fatal(err)
		}
		return req.Messages
	}

	same := func(first, second []json.RawMessage) {
		t.Helper()
		if len(second) < len(first) || !strings.Contains(fmt.Sprintf("%s", first), "Rex") {
			t.Fatalf("the first prompt recalled nothing, or the second is shorter:\n%s\n---\n%s", first, second)
		}
		for i := range first {
			if !jsonSame(second[i], string(first[i])) {
				t.Errorf("message %d changed between the chat's requests, a cache miss from there on:\nfirst  %s\nsecond %s", i, first[i], second[i])
			}
		}
	}

	// A chat in a conversation it names.
	named := map[string]string{"X-Memory-User": "ana", "X-Memory-Conversation": "named-chat"}
	sys, q := map[string]any{"role": "system", "content": "Be brief."}, user("What is my dog called?")
	r := chat(t, gw, named, false, sys, q)
	var reply struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.Body, &reply); r.Status != http.StatusOK || err != nil || len(reply.Choices) != 1 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	first := last()
	chat(t, gw, named, false, sys, q, reply.Choices[0].Message, user("Thanks, noted."))
	same(first, last())

	// Two headerless chats that open alike: the second goes on in a
	// branch of the conversation the first keeps.
	a, b := newForkChat(t, gw, "ana"), newForkChat(t, gw, "ana")
	a.say("What is my dog called?")
	x := a.say("Thanks, noted.")
	if c := b.say("What is my dog called?"); c != memory.DefaultConversation {
		t.Fatalf("chat B's first turn in %q, want default", c)
	}
	first = last()
	if f := b.say("Tell me about cats instead."); f == x || f == memory.DefaultConversation {
		t.Fatalf("chat B went on in %q (chat A in %q), want a branch of its own", f, x)
	}
	same(first, last())
}
