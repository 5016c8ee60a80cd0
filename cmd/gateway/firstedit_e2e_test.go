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
			// recalled reports whether recall in conv finds the message keyed key.
			recalled := func(text, key string) bool {
				rec, err := g.mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{Identity: id, Text: text, Now: time.Now()})
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range rec.Items {
					if it.Ref == key {
						return true
					}
				}
				return false
			}

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

// namedChatSender returns a function that sends history to g as user's
// full-history client in the named conversation conv
// (X-Memory-Conversation) and returns it with the reply appended.
func namedChatSender(t *testing.T, g *testGateway, user, conv string) func(history ...map[string]any) []map[string]any {
	return func(history ...map[string]any) []map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "user": user, "messages": history})
		req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Memory-Conversation", conv)
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
