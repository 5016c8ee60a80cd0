package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// forkChat is a headerless full-history chat (the user named in the body
// only, as a "change one URL" client does): it resends its system prompt
// and every earlier message each turn, and keeps the replies it got.
type forkChat struct {
	t       *testing.T
	url     string
	user    string
	history []map[string]any
}

func newForkChat(t *testing.T, url, user string) *forkChat {
	return &forkChat{t: t, url: url, user: user, history: []map[string]any{{"role": "system", "content": "You are helpful."}}}
}

// grow adds filler messages, "message i" alternating user and assistant,
// until the chat's history holds n messages besides its system prompt.
func (c *forkChat) grow(n int) {
	for i := len(c.history) - 1; i < n; i++ {
		c.history = append(c.history, map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprint("message ", i)})
	}
}

// say sends text as the chat's next user message and returns the
// conversation memgate answered in; the reply joins the history.
func (c *forkChat) say(text string) string {
	c.history = append(c.history, map[string]any{"role": "user", "content": text})
	return c.send()
}

// send sends the history as it is (its last message a user's) and returns
// the conversation memgate answered in; the reply joins the history.
func (c *forkChat) send() string {
	c.t.Helper()
	conv, err := c.trySend()
	if err != nil {
		c.t.Fatal(err)
	}
	return conv
}

// trySend is send reporting a failure instead of failing the test, for a
// chat sent from a goroutine of its own.
func (c *forkChat) trySend() (string, error) {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "user": c.user, "messages": c.history})
	resp, err := http.Post(c.url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	reply := chatReply(b)
	if reply == "" {
		return "", fmt.Errorf("no reply in %s", b)
	}
	c.history = append(c.history, map[string]any{"role": "assistant", "content": reply})
	return resp.Header.Get("X-Memory-Conversation"), nil
}

// fork returns a copy of the chat with its last n messages dropped: the
// client editing or regenerating an earlier point of it.
func (c *forkChat) fork(drop int) *forkChat {
	d := *c
	d.history = append([]map[string]any(nil), c.history[:len(c.history)-drop]...)
	return &d
}

// countingUpstream answers each chat completion "reply N: <last user
// message>", N counting the calls: a regenerated turn gets a new answer.
func countingUpstream() http.Handler {
	var n atomic.Int64
	return answeringUpstream(func(last string) string { return fmt.Sprintf("reply %d: %s", n.Add(1), last) })
}

// liveAndSuperseded returns a conversation's live messages as "role:
// content" lines, and how many of its messages were superseded.
func liveAndSuperseded(t *testing.T, g *testGateway, id memory.Identity) ([]string, int) {
	t.Helper()
	live, _ := storedContents(t, g, id)
	branches, err := g.mem.store.Branches(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range branches {
		n += len(b.Messages)
	}
	return live, n
}

// assertConversation waits until conversation conv of user holds want
// live, in order, and checks that none of its messages was superseded.
func assertConversation(t *testing.T, g *testGateway, user, conv string, want ...string) {
	t.Helper()
	id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
	waitStored(t, g, id, len(want))
	live, superseded := liveAndSuperseded(t, g, id)
	if strings.Join(live, "\n") != strings.Join(want, "\n") || superseded != 0 {
		t.Fatalf("%s holds (%d superseded):\n%s\nwant:\n%s", conv, superseded, strings.Join(live, "\n"), strings.Join(want, "\n"))
	}
}

// assertConversations checks that user has exactly the conversations
// want (id → message count).
func assertConversations(t *testing.T, g *testGateway, user string, want map[string]int) {
	t.Helper()
	list, err := g.mem.store.Conversations(context.Background(), memory.DefaultTenant, user)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range list {
		got[c.ID] = c.MessageCount
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("conversations %v, want %v", got, want)
	}
}

// TestChatsSharingAnOpenerStayApart: two headerless full-history chats of
// one user with the same system prompt and the same first message ("hi",
// answered alike) derive the same conversation. The first chat keeps it;
// the second, whose history differs from it, goes to a conversation of its
// own, which holds the shared opening too (chat B's first turn, identical
// to chat A's, was not stored again in default). Interleaved, neither
// supersedes the other: both keep every turn live, stored once, and the
// first chat's turns stay recallable — on both stores.
func TestChatsSharingAnOpenerStayApart(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "opener-" + strings.ReplaceAll(name, "+", "-")
			a, b := newForkChat(t, g.URL, user), newForkChat(t, g.URL, user)

			if c := a.say("hi"); c != memory.DefaultConversation {
				t.Fatalf("first turn of chat A in %q, want default", c)
			}
			x := a.say("I am planning a trip to Peru in March")
			if x == memory.DefaultConversation {
				t.Fatalf("chat A's second turn in default")
			}
			if c := a.say("what shoes should I pack"); c != x {
				t.Fatalf("chat A's third turn in %q, want %q", c, x)
			}
			if c := b.say("hi"); c != memory.DefaultConversation {
				t.Fatalf("first turn of chat B in %q, want default", c)
			}
			f := b.say("help me write a cover letter")
			if f == x || f == memory.DefaultConversation || !strings.HasPrefix(f, "chat-") || len(f) != len(x) {
				t.Fatalf("chat B continued in %q (chat A in %q), want a conversation of its own", f, x)
			}
			if c := a.say("and a raincoat?"); c != x {
				t.Fatalf("chat A's fourth turn in %q, want %q", c, x)
			}
			if c := b.say("for a nursing job"); c != f {
				t.Fatalf("chat B's third turn in %q, want %q", c, f)
			}

			assertConversation(t, g, user, x, "user: hi", "assistant: ack: hi",
				"user: I am planning a trip to Peru in March", "assistant: ack: I am planning a trip to Peru in March",
				"user: what shoes should I pack", "assistant: ack: what shoes should I pack",
				"user: and a raincoat?", "assistant: ack: and a raincoat?")
			assertConversation(t, g, user, f, "user: hi", "assistant: ack: hi",
				"user: help me write a cover letter", "assistant: ack: help me write a cover letter",
				"user: for a nursing job", "assistant: ack: for a nursing job")
			// Each first turn was stored once, and moved: default is gone.
			assertConversations(t, g, user, map[string]int{x: 8, f: 6})

			// Chat A's turns are still recalled in its conversation.
			xid := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: x}
			_, msgs, err := g.mem.store.Conversation(context.Background(), xid)
			if err != nil {
				t.Fatal(err)
			}
			peru := msgs[2].Key
			eventually(t, "chat A's Peru turn recalled", func() bool {
				rec, err := g.mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{Identity: xid, Text: "trip to Peru in March", Now: time.Now()})
				for _, it := range rec.Items {
					if err == nil && it.Ref == peru && it.Conversation == x {
						return true
					}
				}
				return false
			})
		})
	}
}

// TestDerivedConversationEdits: in a headerless full-history chat, a
// regenerated answer (the same user turn sent again) supersedes the old
// one in the chat's conversation, as before; an edited latest message
// forks the chat into a conversation of its own, leaving the original
// branch live where it was, and each branch goes on in its conversation; a
// secret in the history, stored redacted, forks nothing; a chat opening
// like another but answered differently forks, and its first turn moves
// from default into its own conversation — on both stores.
func TestDerivedConversationEdits(t *testing.T) {
	up := upstreamtest.New(t, countingUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "edits-" + strings.ReplaceAll(name, "+", "-")
			reply := func(c *forkChat, i int) string { return "assistant: " + c.history[i]["content"].(string) }

			// Regenerate: the same last user message, a new answer.
			c := newForkChat(t, g.URL, user)
			c.say("hi")
			x := c.say("name a colour")
			regen := c.fork(1)
			if got := regen.send(); got != x {
				t.Fatalf("regenerated turn in %q, want %q", got, x)
			}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: x}
			eventually(t, "the regenerated answer superseding the old one", func() bool {
				live, superseded := liveAndSuperseded(t, g, id)
				return superseded == 2 && strings.Join(live, "\n") == strings.Join([]string{"user: hi", reply(regen, 2),
					"user: name a colour", reply(regen, 4)}, "\n")
			})

			// Edit: the latest user message changed. The regenerated
			// branch stays live in x; the edit goes on in a conversation
			// of its own.
			edit := regen.fork(2)
			f := edit.say("name a fruit")
			if f == x || f == memory.DefaultConversation {
				t.Fatalf("edited turn in %q, want a new conversation (not %q)", f, x)
			}
			if got := edit.say("a red one"); got != f {
				t.Fatalf("the edit's next turn in %q, want %q", got, f)
			}
			if got := regen.say("a darker one"); got != x {
				t.Fatalf("the original branch's next turn in %q, want %q", got, x)
			}
			assertConversation(t, g, user, f, "user: hi", reply(edit, 2), "user: name a fruit", reply(edit, 4),
				"user: a red one", reply(edit, 6))
			id6 := waitStored(t, g, id, 6)
			live, superseded := liveAndSuperseded(t, g, id)
			want := []string{"user: hi", reply(regen, 2), "user: name a colour", reply(regen, 4), "user: a darker one", reply(regen, 6)}
			if strings.Join(live, "\n") != strings.Join(want, "\n") || superseded != 2 || len(id6) != 6 {
				t.Fatalf("%s holds (%d superseded):\n%s\nwant (2 superseded):\n%s", x, superseded, strings.Join(live, "\n"), strings.Join(want, "\n"))
			}

			// A secret in the history: stored redacted, it still matches
			// what the client resends.
			secret := "my key is sk-" + "proj-" + strings.Repeat("Ab3_", 12)
			s := newForkChat(t, g.URL, user+"-secret")
			s.say("hello")
			sx := s.say(secret)
			if got := s.say("thanks"); got != sx {
				t.Fatalf("turn after a secret in %q, want %q", got, sx)
			}
			if got := s.say("bye"); got != sx {
				t.Fatalf("second turn after a secret in %q, want %q", got, sx)
			}
			sid := memory.Identity{Tenant: memory.DefaultTenant, User: user + "-secret", Conversation: sx}
			waitStored(t, g, sid, 8)
			live, superseded = liveAndSuperseded(t, g, sid)
			if superseded != 0 || !strings.Contains(live[2], "[redacted:openai_key]") || strings.Contains(strings.Join(live, "\n"), "Ab3_") {
				t.Fatalf("%s holds (%d superseded):\n%s\nwant the secret redacted and nothing superseded", sx, superseded, strings.Join(live, "\n"))
			}
			assertConversations(t, g, user+"-secret", map[string]int{sx: 8})

			// Two chats opening alike, answered differently: the second
			// forks at the reply and adopts its own first turn.
			two := user + "-two"
			a, b := newForkChat(t, g.URL, two), newForkChat(t, g.URL, two)
			a.say("hi")
			ax := a.say("plan a trip")
			if got := b.say("hi"); got != memory.DefaultConversation {
				t.Fatalf("chat B's first turn in %q, want default", got)
			}
			firstB := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: two, Conversation: memory.DefaultConversation}, 2)[0].Key
			bf := b.say("write a letter")
			if bf == ax || bf == memory.DefaultConversation {
				t.Fatalf("chat B continued in %q (chat A in %q), want a conversation of its own", bf, ax)
			}
			assertConversation(t, g, two, ax, "user: hi", reply(a, 2), "user: plan a trip", reply(a, 4))
			assertConversation(t, g, two, bf, "user: hi", reply(b, 2), "user: write a letter", reply(b, 4))
			assertConversations(t, g, two, map[string]int{ax: 4, bf: 4})
			if k := first(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: two, Conversation: bf}).Key; k != firstB {
				t.Fatalf("chat B's conversation starts with %q, want its first turn %q moved there", k, firstB)
			}
		})
	}
}
