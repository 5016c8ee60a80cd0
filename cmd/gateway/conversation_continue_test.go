package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// continuingUpstream answers a request ending with a user message "ack:
// <message>", and one ending with an assistant message (asking the model
// to go on with it: "continue") " (more on <the last user message>)".
func continuingUpstream() http.Handler {
	return goingOnUpstream(func(last string, goOn bool) string {
		if goOn {
			return " (more on " + last + ")"
		}
		return "ack: " + last
	})
}

// TestContinuedReplyStaysInItsConversation: a headerless full-history
// client asks the model to go on with a reply it cut off ("continue":
// the request ends with that assistant message, as SillyTavern, LibreChat
// and an Anthropic prefill send it), then resends the reply joined with
// its continuation. The chat stays one conversation, holding each message
// once, the continued replies joined — the first one's too, taken over
// from default — and the next turns neither fork nor supersede them: only
// the partial replies, replaced by their joined text, are superseded — on
// both stores, streamed and not.
func TestContinuedReplyStaysInItsConversation(t *testing.T) {
	up := upstreamtest.New(t, continuingUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "cont-" + strings.ReplaceAll(name, "+", "-")
			history := []map[string]any{{"role": "system", "content": "You are a storyteller."}}
			turn := 0
			send := func() string {
				t.Helper()
				turn++
				return bodyUserChat(t, g.URL, user, turn%2 == 0, history)
			}
			say := func(text string) string {
				t.Helper()
				history = append(history, map[string]any{"role": "user", "content": text})
				conv := send()
				history = append(history, map[string]any{"role": "assistant", "content": "ack: " + text})
				return conv
			}
			// goOn asks for the last reply's continuation and joins it.
			goOn := func() string {
				t.Helper()
				conv := send()
				last := history[len(history)-1]
				var asked string
				for _, m := range history {
					if m["role"] == "user" {
						asked = m["content"].(string)
					}
				}
				last["content"] = fmt.Sprint(last["content"], " (more on ", asked, ")")
				return conv
			}
			if conv := say("tell me of a dragon"); conv != memory.DefaultConversation {
				t.Fatalf("first turn in %q, want default", conv)
			}
			// Continued at once: the chat's first reply, stored in default.
			x := goOn()
			if x == memory.DefaultConversation {
				t.Fatal("the first reply's continuation in default")
			}
			for i, step := range []func() string{
				func() string { return say("and of a knight") },
				func() string { return say("who wins?") },
				goOn,
				func() string { return say("thanks") },
			} {
				if conv := step(); conv != x {
					t.Fatalf("step %d answered in %q, want %q (the chat's conversation)", i+1, conv, x)
				}
			}
			var want []string
			for _, m := range history[1:] {
				want = append(want, fmt.Sprint(m["role"], ": ", m["content"]))
			}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: x}
			waitStored(t, g, id, len(want))
			live, superseded := liveAndSuperseded(t, g, id)
			if strings.Join(live, "\n") != strings.Join(want, "\n") || superseded != 2 {
				t.Fatalf("%s holds (%d superseded, want the 2 partial replies):\n%s\nwant:\n%s",
					x, superseded, strings.Join(live, "\n"), strings.Join(want, "\n"))
			}
			assertConversations(t, g, user, map[string]int{x: len(want)})
		})
	}
}

// TestTrailingInstructionIsNoTurn: a headerless full-history client sends
// its whole history followed by a system message with an instruction of
// its own (SillyTavern's impersonation, "write the next reply as the
// user", or a quiet prompt). That request stays in the chat's
// conversation and stores nothing: neither the instruction nor its reply
// is a turn of the chat. The chat's next turn goes on there, which holds
// each message once, none superseded — on both stores.
func TestTrailingInstructionIsNoTurn(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "quiet-" + strings.ReplaceAll(name, "+", "-")
			c := &windowChat{t: t, url: g.URL, user: user, keep: 100}
			ack := func(s string) string { return "ack: " + s }
			c.say("I want to plan a garden", ack)
			x := c.say("Which vegetables grow fast?", ack)
			if x == memory.DefaultConversation {
				t.Fatal("second turn in default")
			}
			for i, stream := range []bool{false, true} {
				sent := append([]map[string]any{{"role": "system", "content": "You are a helpful companion."}}, c.history...)
				sent = append(sent, map[string]any{"role": "system", "content": fmt.Sprint("Write the next reply as the user would (", i, ").")})
				if conv := bodyUserChat(t, g.URL, user, stream, sent); conv != x {
					t.Fatalf("the instruction answered in %q, want %q", conv, x)
				}
			}
			c.goesOn(x, 3, 4, ack)
			assertConversation(t, g, user, x, c.said()...)
			assertConversations(t, g, user, map[string]int{x: len(c.history)})
		})
	}
}
