package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// windowChat is a headerless client that cuts its history (a "last N
// messages" setting, or dropping the oldest turns once its model's
// context fills): each turn it sends its constant system prompt and only
// the last keep messages of the chat, the new user message among them.
type windowChat struct {
	t       *testing.T
	url     string
	user    string
	keep    int
	history []map[string]any // the whole chat, as the client holds it
	turns   int
}

// say sends text as the chat's next message, every other turn streamed,
// and returns the conversation memgate answered in; the reply (the
// upstream's) joins the history.
func (c *windowChat) say(text string, reply func(string) string) string {
	c.t.Helper()
	c.history = append(c.history, map[string]any{"role": "user", "content": text})
	sent := append([]map[string]any{{"role": "system", "content": "You are a helpful companion."}},
		c.history[max(0, len(c.history)-c.keep):]...)
	conv := bodyUserChat(c.t, c.url, c.user, c.turns%2 == 1, sent)
	c.turns++
	c.history = append(c.history, map[string]any{"role": "assistant", "content": reply(text)})
	return conv
}

// goesOn sends turns from..to ("turn i of the chat") and fails unless
// each is answered in conversation x.
func (c *windowChat) goesOn(x string, from, to int, reply func(string) string) {
	c.t.Helper()
	for i := from; i <= to; i++ {
		if conv := c.say(fmt.Sprint("turn ", i, " of the chat"), reply); conv != x {
			c.t.Fatalf("turn %d answered in %q, want %q (the chat's conversation)", i, conv, x)
		}
	}
}

// said returns the chat's messages as "role: content" lines.
func (c *windowChat) said() []string {
	out := make([]string, len(c.history))
	for i, m := range c.history {
		out[i] = fmt.Sprint(m["role"], ": ", m["content"])
	}
	return out
}

// greetingUpstream answers "hi" with a stock greeting (the same in every
// chat) and anything else "ack: <last user message>".
func greetingUpstream() http.Handler { return answeringUpstream(greetingReply) }

func greetingReply(text string) string {
	if text == "hi" {
		return "Hello! How can I help you today?"
	}
	return "ack: " + text
}

// TestWindowedChatIsOneConversation replays the probe: a headerless client
// that resends only its last messages (4: its window starts at a reply
// from the third turn on; 5: at a user message) names another first user
// message every turn, so every turn derives another conversation. Each
// turn continues the conversation holding the newest reply it resends
// instead: from its second turn on, memgate answers every turn in one
// conversation, which ends holding each of the chat's messages once, in
// order, and is the user's only one — on both stores, streamed and not.
func TestWindowedChatIsOneConversation(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			for _, keep := range []int{4, 5} {
				t.Run(fmt.Sprint("last", keep), func(t *testing.T) {
					user := fmt.Sprintf("win%d-%s", keep, strings.ReplaceAll(name, "+", "-"))
					c := &windowChat{t: t, url: g.URL, user: user, keep: keep}
					ack := func(s string) string { return "ack: " + s }
					if conv := c.say("my name is Ada", ack); conv != memory.DefaultConversation {
						t.Fatalf("first turn in %q, want default", conv)
					}
					x := c.say("I keep bees", ack)
					if x == memory.DefaultConversation {
						t.Fatal("second turn in default")
					}
					c.goesOn(x, 3, 7, ack)
					assertConversation(t, g, user, x, c.said()...)
					assertConversations(t, g, user, map[string]int{x: len(c.history)})
				})
			}
		})
	}
}

// TestWindowedChatsOpeningAlikeStayApart: two chats of one user, both
// cutting their history to their last 4 messages, open alike ("hi",
// answered with the same greeting) and then part. The greeting both hold
// tells them apart no more than it tells anything: each chat goes on in
// its own conversation, which holds its messages once, in order — on
// both stores.
func TestWindowedChatsOpeningAlikeStayApart(t *testing.T) {
	up := upstreamtest.New(t, greetingUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "greet-" + strings.ReplaceAll(name, "+", "-")
			a := &windowChat{t: t, url: g.URL, user: user, keep: 4}
			b := &windowChat{t: t, url: g.URL, user: user, keep: 4}
			a.say("hi", greetingReply)
			xa := a.say("plan a trip to Peru", greetingReply)
			b.say("hi", greetingReply)
			xb := b.say("help me write a cover letter", greetingReply)
			if xa == xb || xa == memory.DefaultConversation || xb == memory.DefaultConversation {
				t.Fatalf("chat A in %q, chat B in %q: want two conversations of their own", xa, xb)
			}
			for i := 3; i <= 6; i++ {
				if conv := a.say(fmt.Sprint("Peru, part ", i), greetingReply); conv != xa {
					t.Fatalf("chat A's turn %d in %q, want %q", i, conv, xa)
				}
				if conv := b.say(fmt.Sprint("the letter, part ", i), greetingReply); conv != xb {
					t.Fatalf("chat B's turn %d in %q, want %q", i, conv, xb)
				}
			}
			assertConversation(t, g, user, xa, a.said()...)
			assertConversation(t, g, user, xb, b.said()...)
			assertConversations(t, g, user, map[string]int{xa: len(a.history), xb: len(b.history)})
		})
	}
}

// TestTrimmingClientKeepsOneCopy: a model's reply often opens or closes
// with line breaks, or opens with its reasoning in a <think> block (a
// reasoning model behind an OpenAI-compatible server), and chat apps keep
// and resend it trimmed, without the block. A headerless client resending
// its whole history (its first turn then taken over from default) or its
// last 4 messages (its chat found by the reply it resends) stays one
// conversation, holding each message once, the replies as memgate
// relayed them, none superseded by its trimmed resend — on both stores,
// streamed and not.
func TestTrimmingClientKeepsOneCopy(t *testing.T) {
	ack := func(s string) string { return "ack: " + s }
	for _, tc := range []struct {
		name            string
		relayed, resent func(string) string
	}{
		{"trim", func(s string) string { return "\n\nack: " + s + "\n" }, ack},
		{"think", func(s string) string { return "<think>\nThe user says " + s + ".\n</think>\n\nack: " + s }, func(s string) string { return "ack: " + s }},
	} {
		up := upstreamtest.New(t, answeringUpstream(tc.relayed))
		for name, mk := range storeConfigs(t, up) {
			t.Run(tc.name+"-"+name, func(t *testing.T) {
				g := startGateway(t, mk(t))
				for _, keep := range []int{100, 4} {
					t.Run(fmt.Sprint("last", keep), func(t *testing.T) {
						user := fmt.Sprintf("%s%d-%s", tc.name, keep, strings.ReplaceAll(name, "+", "-"))
						c := &windowChat{t: t, url: g.URL, user: user, keep: keep}
						c.say("my name is Ada", tc.resent)
						x := c.say("I keep bees", tc.resent)
						if x == memory.DefaultConversation {
							t.Fatal("second turn in default")
						}
						c.goesOn(x, 3, 6, tc.resent)
						want := c.said()
						for i := 1; i < len(want); i += 2 {
							want[i] = "assistant: " + tc.relayed(strings.TrimPrefix(c.said()[i-1], "user: "))
						}
						assertConversation(t, g, user, x, want...)
						assertConversations(t, g, user, map[string]int{x: len(c.history)})
					})
				}
			})
		}
	}
}

// TestTwoMessageWindowIsOneConversation: a headerless client that resends
// only the previous reply and its new question (a window of 2) names
// another first user message every turn. From its third turn on, each
// turn continues the conversation holding the reply it resends, when that
// reply is long enough to tell a chat by: the chat's second turn starts
// it (the first turn stays in default, holding the first reply the
// second resent), and it ends holding each later message once, in order.
// A chat of the same user whose replies are short ("OK.") shares them
// with other chats too readily: its turns continue no conversation, and
// never the first chat's — on both stores.
func TestTwoMessageWindowIsOneConversation(t *testing.T) {
	// Short answers to the short chat, long ones to the other.
	answer := func(s string) string {
		if strings.HasPrefix(s, "short") {
			return "OK."
		}
		return "Here is a considered answer to " + s + ", with the details that matter for your garden."
	}
	up := upstreamtest.New(t, answeringUpstream(answer))
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "win2-" + strings.ReplaceAll(name, "+", "-")
			long := answer
			c := &windowChat{t: t, url: g.URL, user: user, keep: 2}
			if conv := c.say("I keep bees", long); conv != memory.DefaultConversation {
				t.Fatalf("first turn in %q, want default", conv)
			}
			x := c.say("How many hives fit?", long)
			if x == memory.DefaultConversation {
				t.Fatal("second turn in default")
			}
			c.goesOn(x, 3, 6, long)
			short := &windowChat{t: t, url: g.URL, user: user, keep: 2}
			ok := func(string) string { return "OK." }
			short.say("short opener", ok)
			seen := map[string]bool{x: true}
			for i := range 3 {
				conv := short.say(fmt.Sprint("short ", i), ok)
				if seen[conv] || conv == memory.DefaultConversation {
					t.Fatalf("the short chat's turn %d in %q, which another turn holds", i+2, conv)
				}
				seen[conv] = true
			}
			assertConversation(t, g, user, x, c.said()[1:]...)
		})
	}
}
