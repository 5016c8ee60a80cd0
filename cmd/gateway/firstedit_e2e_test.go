package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestFirstMessageEditSupersedes: a full-history chat in a named
// conversation (X-Memory-Conversation) holds three exchanges; the user
// edits the chat's very first message in place and sends a new turn, the
// rest of the history resent unchanged. Through the gateway, on both
// stores, the edit supersedes the whole stored branch from its first
// message: the conversation's live messages are exactly the resent history
// and the new exchange, nothing twice, and recall no longer finds the old
// first message.
func TestFirstMessageEditSupersedes(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g, user, _ := startLongChat(t, mk, 100, "firstedit-", name)
			const conv = "hobbies"
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
			send := namedChatSender(t, g, user, conv)
			say := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
			recalled := recalledIn(t, g, id)

			history := send(say("My sister Mariana collects antique barometers."))
			history = send(append(history, say("What should I get her for her birthday?"))...)
			history = send(append(history, say("Her budget is around fifty euros."))...)
			stored := waitStored(t, g, id, len(history))
			old := stored[0].Key
			eventually(t, "the first message recalled", func() bool { return recalled("antique barometers", old) })

			// The edit: the first message changes, the rest of the history
			// is resent as it was, with a new turn.
			edited := slices.Clone(history)
			edited[0] = say("My sister Mariana collects vintage typewriters.")
			edited = send(append(edited, say("Anything else she might like?"))...)

			var want []string
			for _, m := range edited {
				want = append(want, m["role"].(string)+": "+m["content"].(string))
			}
			eventually(t, "the edited branch live", func() bool {
				live, _ := liveAndSuperseded(t, g, id)
				return slices.Contains(live, "user: Anything else she might like?")
			})
			live, superseded := liveAndSuperseded(t, g, id)
			if strings.Join(live, "\n") != strings.Join(want, "\n") || superseded != len(history) {
				t.Fatalf("after the edit the conversation holds (%d superseded, want %d):\n%s\nwant:\n%s",
					superseded, len(history), strings.Join(live, "\n"), strings.Join(want, "\n"))
			}
			eventually(t, "the old first message no longer recalled", func() bool { return !recalled("antique barometers", old) })
		})
	}
}

// TestFirstMessageEditReusedNameKeepsOldChat: an app that names every chat
// of a user alike (one X-Memory-Conversation per user) starts a new chat
// whose first reply is the greeting the stored chat's first reply was
// (replies repeat across chats). The new chat's first exchange is not in
// the conversation (here sent with memory off, as when its capture was
// lost), so its second request resends [its first message, the greeting]:
// unlike the stored chat's first message, the greeting as stored. That is
// no edit of the stored chat's first message: the new chat is stored
// beside it, and the old chat stays live and recallable.
func TestFirstMessageEditReusedNameKeepsOldChat(t *testing.T) {
	const greeting = "Hello! How can I assist you today?"
	echo := echoUpstream()
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Messages []map[string]any `json:"messages"`
		}
		json.Unmarshal(body, &req)
		if n := len(req.Messages); n > 0 && req.Messages[n-1]["role"] == "user" && slices.Contains([]any{"hi", "hey"}, req.Messages[n-1]["content"]) {
			upstreamtest.Chat(upstreamtest.Reply{Content: greeting}).ServeHTTP(w, r)
			return
		}
		echo.ServeHTTP(w, r)
	}))
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g, user, _ := startLongChat(t, mk, 100, "reusedname-", name)
			const conv = "assistant"
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
			send := namedChatSender(t, g, user, conv)
			say := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
			recalled := recalledIn(t, g, id)

			old := send(say("hi"))
			old = send(append(old, say("My sister Mariana collects antique barometers."))...)
			old = send(append(old, say("What should I get her for her birthday?"))...)
			stored := waitStored(t, g, id, len(old))
			barometers := stored[2].Key
			eventually(t, "the old chat recalled", func() bool { return recalled("antique barometers", barometers) })

			// The new chat under the same name.
			chat := namedChatSender(t, g, user, conv, "X-Memory-Mode", "off")(say("hey"))
			if chat[1]["content"] != greeting {
				t.Fatalf("the new chat's first reply %q, want the greeting", chat[1]["content"])
			}
			chat = send(append(chat, say("Plan a weekend in Porto for me."))...)

			var want []string
			for _, m := range append(slices.Clone(old), chat...) {
				want = append(want, m["role"].(string)+": "+m["content"].(string))
			}
			eventually(t, "the new chat stored", func() bool {
				live, _ := liveAndSuperseded(t, g, id)
				return slices.Contains(live, "user: Plan a weekend in Porto for me.")
			})
			live, superseded := liveAndSuperseded(t, g, id)
			if strings.Join(live, "\n") != strings.Join(want, "\n") || superseded != 0 {
				t.Fatalf("after the new chat the conversation holds (%d superseded, want 0):\n%s\nwant:\n%s",
					superseded, strings.Join(live, "\n"), strings.Join(want, "\n"))
			}
			if !recalled("antique barometers", barometers) {
				t.Fatal("the old chat is no longer recalled")
			}
		})
	}
}

// namedChatSender returns a function that sends history to g as user's
// full-history client in the named conversation conv
// (X-Memory-Conversation), with the headers given as name, value pairs,
// and returns it with the reply appended.
func namedChatSender(t *testing.T, g *testGateway, user, conv string, headers ...string) func(history ...map[string]any) []map[string]any {
	return func(history ...map[string]any) []map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "user": user, "messages": history})
		req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Memory-Conversation", conv)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &out); resp.StatusCode != 200 || err != nil || len(out.Choices) != 1 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return append(slices.Clone(history), map[string]any{"role": "assistant", "content": out.Choices[0].Message.Content})
	}
}

// recalledIn returns whether recall in id's conversation, asked text,
// finds the message keyed key.
func recalledIn(t *testing.T, g *testGateway, id memory.Identity) func(text, key string) bool {
	return func(text, key string) bool {
		t.Helper()
		rec, err := g.mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{Identity: id, Text: text, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(rec.Items, func(it memory.Item) bool { return it.Ref == key })
	}
}
