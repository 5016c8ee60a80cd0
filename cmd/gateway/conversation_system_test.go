package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// clockChat is a headerless full-history chat whose client puts the
// current time in its system prompt, as many apps do: each request
// carries another system prompt. It names its user in the body only and
// keeps the replies it got (from a non-streamed answer's JSON, or a
// streamed one's deltas).
type clockChat struct {
	t       *testing.T
	url     string
	user    string
	persona string // the system prompt's first line
	minute  *int   // the clock, shared by the copies of a chat
	history []map[string]any
}

func newClockChat(t *testing.T, url, user, persona string) *clockChat {
	return &clockChat{t: t, url: url, user: user, persona: persona, minute: new(int)}
}

// say sends text as the chat's next user message, streamed or not, and
// returns the conversation memgate answered in; the reply joins the
// history.
func (c *clockChat) say(text string, stream bool) string {
	c.history = append(c.history, map[string]any{"role": "user", "content": text})
	return c.send(stream)
}

// send sends the history as it is, after a system prompt naming the next
// minute, and returns the conversation memgate answered in.
func (c *clockChat) send(stream bool) string {
	c.t.Helper()
	*c.minute++
	sys := map[string]any{"role": "system", "content": fmt.Sprintf("%s\nCurrent time: 2026-12-03 07:%02d", c.persona, *c.minute)}
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "user": c.user, "stream": stream,
		"messages": append([]map[string]any{sys}, c.history...)})
	resp, err := http.Post(c.url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		c.t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	reply := chatReply(b)
	if reply == "" {
		c.t.Fatalf("no reply in %s", b)
	}
	c.history = append(c.history, map[string]any{"role": "assistant", "content": reply})
	return resp.Header.Get("X-Memory-Conversation")
}

// chatReply returns the text of a chat completion's one choice: its
// message's, or, of a streamed answer (b holds SSE events), its deltas'
// put together. "" when b holds none.
func chatReply(b []byte) string {
	type choice struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	}
	var out struct {
		Choices []choice `json:"choices"`
	}
	if json.Unmarshal(b, &out) == nil {
		if len(out.Choices) != 1 {
			return ""
		}
		return out.Choices[0].Message.Content
	}
	reply := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		var ev struct {
			Choices []choice `json:"choices"`
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil && len(ev.Choices) > 0 {
			reply += ev.Choices[0].Delta.Content
		}
	}
	return reply
}

// lines returns the chat's history as "role: content" lines.
func (c *clockChat) lines() []string {
	var out []string
	for _, m := range c.history {
		out = append(out, fmt.Sprint(m["role"], ": ", m["content"]))
	}
	return out
}

// fork returns a copy of the chat with its last n messages dropped (the
// client editing or regenerating), on the same clock.
func (c *clockChat) fork(drop int) *clockChat {
	d := *c
	d.history = append([]map[string]any(nil), c.history[:len(c.history)-drop]...)
	return &d
}

// waitServedConversations waits until user's conversations, as the
// management API lists them, are exactly want (id → message count).
func waitServedConversations(t *testing.T, url, user string, want map[string]int) {
	t.Helper()
	var got map[string]int
	eventually(t, fmt.Sprintf("%s's conversations %v", user, want), func() bool {
		var list struct {
			Data []memory.Conversation `json:"data"`
		}
		if apiCall(t, http.MethodGet, url+"/v1/memory/conversations?user="+user, nil, nil, &list) != 200 {
			return false
		}
		got = map[string]int{}
		for _, c := range list.Data {
			got[c.ID] = c.MessageCount
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
}

// servedConversation returns a conversation's live messages, as the
// management API shows them, as "role: content" lines.
func servedConversation(t *testing.T, url, user, conv string) []string {
	t.Helper()
	var out struct {
		Messages []memory.Message `json:"messages"`
	}
	if code := apiCall(t, http.MethodGet, url+"/v1/memory/conversations/"+conv+"?user="+user, nil, nil, &out); code != 200 {
		t.Fatalf("GET conversation %s: %d", conv, code)
	}
	var lines []string
	for _, m := range out.Messages {
		lines = append(lines, m.Role+": "+m.Content)
	}
	return lines
}

// assertServed checks that conversation conv of user holds want, live,
// in order.
func assertServed(t *testing.T, url, user, conv string, want []string) {
	t.Helper()
	if got := servedConversation(t, url, user, conv); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s holds:\n%s\nwant:\n%s", conv, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestChangingSystemPromptIsOneConversation replays, through `gateway
// serve` on both stores, a headerless full-history client whose system
// prompt carries the current minute (another one with every request),
// streamed and not: its first turn is answered in default, every later
// turn in one derived conversation, and the chat ends as that one
// conversation holding each message once, in order — not one
// conversation per turn, each storing the whole resent history again.
// Under such a prompt a regenerated answer stays in the chat's
// conversation and supersedes the old one, an edited latest message goes
// on in a conversation of its own, leaving the original live, and two
// personas of one app (another system prompt each) that open alike but
// go on differently stay two conversations.
func TestChangingSystemPromptIsOneConversation(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres+redis"} {
		t.Run(store, func(t *testing.T) {
			up := upstreamtest.New(t, countingUpstream())
			url := serveOnStore(t, store, map[string]string{"GATEWAY_UPSTREAM_BASE_URL": up.URL()})

			// The probe: 5 turns, each with another system prompt.
			c := newClockChat(t, url, "zed", "You are a helpful assistant.")
			var convs []string
			for i, text := range []string{"hi", "I live in Lisbon.", "I have a cat.", "She is called Miso.", "What do you know?"} {
				convs = append(convs, c.say(text, i%2 == 1))
			}
			x := convs[1]
			if convs[0] != memory.DefaultConversation || x == memory.DefaultConversation {
				t.Fatalf("conversations %v: want the first turn in default, then a derived one", convs)
			}
			for i, conv := range convs[2:] {
				if conv != x {
					t.Fatalf("turn %d in %q, want %q (all turns: %v)", i+3, conv, x, convs)
				}
			}
			waitServedConversations(t, url, "zed", map[string]int{x: 10})
			assertServed(t, url, "zed", x, c.lines())

			// Regenerate the last answer: the same conversation, the new
			// answer in place of the old.
			regen := c.fork(1)
			if got := regen.send(false); got != x {
				t.Fatalf("regenerated turn in %q, want %q", got, x)
			}
			eventually(t, "the regenerated answer in place of the old one", func() bool {
				return strings.Join(servedConversation(t, url, "zed", x), "\n") == strings.Join(regen.lines(), "\n")
			})

			// Edit the last user message: a conversation of its own; the
			// original branch stays live in x and goes on there.
			edit := regen.fork(2)
			f := edit.say("What is my cat called?", true)
			if f == x || f == memory.DefaultConversation {
				t.Fatalf("edited turn in %q, want a conversation of its own (not %q)", f, x)
			}
			if got := edit.say("And where do I live?", false); got != f {
				t.Fatalf("the edit's next turn in %q, want %q", got, f)
			}
			if got := regen.say("Thanks.", true); got != x {
				t.Fatalf("the original's next turn in %q, want %q", got, x)
			}
			waitServedConversations(t, url, "zed", map[string]int{x: 12, f: 12})
			assertServed(t, url, "zed", x, regen.lines())
			assertServed(t, url, "zed", f, edit.lines())

			// Two personas of one app, the same user, the same first
			// message answered differently, then going on differently.
			pirate := newClockChat(t, url, "yan", "You are a pirate.")
			monk := newClockChat(t, url, "yan", "You are a monk.")
			pirate.say("hello", false)
			monk.say("hello", true)
			px := pirate.say("Tell me of the sea.", true)
			mx := monk.say("Tell me of silence.", false)
			if px == mx || px == memory.DefaultConversation || mx == memory.DefaultConversation {
				t.Fatalf("personas in %q and %q, want two conversations", px, mx)
			}
			if got := pirate.say("And of ships?", false); got != px {
				t.Fatalf("the pirate's third turn in %q, want %q", got, px)
			}
			if got := monk.say("And of prayer?", true); got != mx {
				t.Fatalf("the monk's third turn in %q, want %q", got, mx)
			}
			waitServedConversations(t, url, "yan", map[string]int{px: 6, mx: 6})
			assertServed(t, url, "yan", px, pirate.lines())
			assertServed(t, url, "yan", mx, monk.lines())
		})
	}
}

// TestChatOfAnEarlierBuildGoesOn: a headerless full-history chat that an
// earlier memgate stored under the id it derived with the system prompt
// hashed (memory.LegacyConversation; simulated here by naming that id)
// goes on there after the upgrade, through `gateway serve` on both
// stores: its next turns, streamed and not, answer in that conversation
// and store only what is new — its history is not stored again, whole,
// under the id derived now.
func TestChatOfAnEarlierBuildGoesOn(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres+redis"} {
		t.Run(store, func(t *testing.T) {
			up := upstreamtest.New(t, echoUpstream())
			url := serveOnStore(t, store, map[string]string{"GATEWAY_UPSTREAM_BASE_URL": up.URL()})
			history := []map[string]any{{"role": "system", "content": "You are terse."}}
			say := func(text string, named bool, stream bool, want string) {
				t.Helper()
				history = append(history, user(text))
				h := map[string]string{"X-Memory-User": "olga"}
				if named {
					h["X-Memory-Conversation"] = want
				}
				r := chat(t, url, h, stream, history...)
				if r.Status != 200 {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				if got := r.Header.Get("X-Memory-Conversation"); got != want {
					t.Fatalf("%q answered in %q, want %q", text, got, want)
				}
				history = append(history, assistant("ack: "+text))
			}
			legacy := memory.LegacyConversation(memory.DefaultTenant, "olga", []memory.Message{
				{Role: "system", Content: "You are terse."}, {Role: "user", Content: "I am Olga."}})
			if legacy == memory.DerivedConversation(memory.DefaultTenant, "olga", []memory.Message{{Role: "user", Content: "I am Olga."}}) {
				t.Fatal("the legacy id is the one derived now")
			}
			say("I am Olga.", true, false, legacy)
			say("I live in Porto.", true, false, legacy)
			waitServedConversations(t, url, "olga", map[string]int{legacy: 4})

			say("I have a dog.", false, true, legacy)
			say("What do you know?", false, false, legacy)
			var want []string
			for _, m := range history[1:] {
				want = append(want, fmt.Sprint(m["role"], ": ", m["content"]))
			}
			waitServedConversations(t, url, "olga", map[string]int{legacy: 8})
			assertServed(t, url, "olga", legacy, want)
		})
	}
}
