package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// continuingClaude is a fake Messages API: a request ending with a user
// message is answered "ack: <its text>", one ending with an assistant
// message (a prefill: the model goes on with it) " (more on <the last
// user text>)" — whole or streamed, as the request asks. A message's text
// is its string content or its last text block.
func continuingClaude(t *testing.T) *httptest.Server {
	t.Helper()
	text := func(content json.RawMessage) string {
		var s string
		if json.Unmarshal(content, &s) == nil {
			return s
		}
		// The last text block: memgate puts a recalled block before it.
		var blocks []struct{ Type, Text string }
		json.Unmarshal(content, &blocks)
		for _, b := range blocks {
			if b.Type == "text" {
				s = b.Text
			}
		}
		return s
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		last, role := "", ""
		for _, m := range req.Messages {
			if role = m.Role; role == "user" {
				last = text(m.Content)
			}
		}
		answer := "ack: " + last
		if role == "assistant" {
			answer = " (more on " + last + ")"
		}
		q, _ := json.Marshal(answer)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`, req.Model, q)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":%q,\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n", req.Model)
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n", q)
		fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n")
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// bodyUserClaude sends one Messages API request naming its user only in
// metadata.user_id (no memgate header) and returns the conversation
// memgate answered with.
func bodyUserClaude(t *testing.T, url, user string, stream bool, system string, msgs []map[string]any) string {
	t.Helper()
	r := sendBody(t, url+"/v1/messages", map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01"},
		map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": stream,
			"system": system, "metadata": map[string]any{"user_id": user}, "messages": msgs})
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return r.Header.Get("X-Memory-Conversation")
}

// TestPrefillInPartsIsJoined: a headerless full-history client starts
// the assistant's reply itself, or asks the model to go on with one cut
// off — the request ends with an assistant message — and sends that
// message as its SDK does: in text blocks on the Messages API (the
// Anthropic SDKs), in text parts on Chat Completions, or as a string.
// Whatever the form, the reply is stored at once joined with that
// message, in its place: a continue of the chat's first reply adopts
// that turn from default and supersedes the partial reply there, a
// prefill of a new turn's reply stores the turn with the joined reply.
// The chat's next turns, which resend the joined replies, go on in the
// same conversation, which holds each message once — on both stores,
// streamed and not.
func TestPrefillInPartsIsJoined(t *testing.T) {
	claude := continuingClaude(t)
	up := upstreamtest.New(t, continuingUpstream())
	clients := []struct {
		name   string
		claude bool
		parts  bool
	}{
		{"claude-blocks", true, true},
		{"claude-string", true, false},
		{"chat-parts", false, true},
		{"chat-string", false, false},
	}
	for name, mk := range storeConfigs(t, up) {
		for _, c := range clients {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				cfg := mk(t)
				cfg.Upstream.Anthropic.BaseURL = claude.URL + "/v1"
				g := startGateway(t, cfg)
				user := "prefill-" + c.name + "-" + strings.ReplaceAll(name, "+", "-")
				// A text block and a text part are written alike.
				content := func(s string) any {
					if !c.parts {
						return s
					}
					return []map[string]any{{"type": "text", "text": s}}
				}
				const system = "You are a storyteller."
				var history []map[string]any
				turn := 0
				send := func() string {
					t.Helper()
					turn++
					if c.claude {
						return bodyUserClaude(t, g.URL, user, turn%2 == 0, system, history)
					}
					sent := append([]map[string]any{{"role": "system", "content": system}}, history...)
					return bodyUserChat(t, g.URL, user, turn%2 == 0, sent)
				}
				say := func(text string) string {
					t.Helper()
					history = append(history, map[string]any{"role": "user", "content": content(text)})
					conv := send()
					history = append(history, map[string]any{"role": "assistant", "content": content("ack: " + text)})
					return conv
				}
				// goOn asks for the last reply's continuation and joins it.
				goOn := func() string {
					t.Helper()
					conv := send()
					last := history[len(history)-1]
					last["content"] = content(sentText(last["content"]) + " (more on " + sentText(history[len(history)-2]["content"]) + ")")
					return conv
				}
				// prefill starts the reply to text itself and joins the
				// model's continuation to it.
				prefill := func(text, start string) string {
					t.Helper()
					history = append(history, map[string]any{"role": "user", "content": content(text)},
						map[string]any{"role": "assistant", "content": content(start)})
					conv := send()
					history[len(history)-1]["content"] = content(start + " (more on " + text + ")")
					return conv
				}
				// stored waits until conversation conv holds the chat, of
				// it only the first partial reply superseded.
				stored := func(conv string) {
					t.Helper()
					var want []string
					for _, m := range history {
						want = append(want, fmt.Sprint(m["role"], ": ", sentText(m["content"])))
					}
					assertLive(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}, want, 1)
				}
				if conv := say("tell me of a dragon"); conv != memory.DefaultConversation {
					t.Fatalf("first turn in %q, want default", conv)
				}
				x := goOn()
				if x == memory.DefaultConversation {
					t.Fatal("the first reply's continuation in default")
				}
				stored(x)
				if conv := say("and of a knight"); conv != x {
					t.Fatalf("the second turn answered in %q, want %q", conv, x)
				}
				if conv := prefill("who wins?", "Sure, here is who wins:"); conv != x {
					t.Fatalf("the prefill answered in %q, want %q", conv, x)
				}
				// Stored at once, joined: the chat's next request is not
				// needed for it.
				stored(x)
				if conv := say("thanks"); conv != x {
					t.Fatalf("the next turn answered in %q, want %q", conv, x)
				}
				stored(x)
				assertConversations(t, g, user, map[string]int{x: len(history)})
			})
		}
	}
}

// sentText returns the text of a message content this file sends: a string
// or text blocks.
func sentText(c any) string {
	if s, ok := c.(string); ok {
		return s
	}
	var out string
	for _, b := range c.([]map[string]any) {
		out += fmt.Sprint(b["text"])
	}
	return out
}

// TestContinueNudgeIsJoinedOnTheNextTurn: SillyTavern's "continue" with
// its prefill off sends the history ending with the reply to go on with,
// then its nudge as a system message ("[Continue your last message
// without repeating its original content.]"). That request is shaped as
// an impersonation or a quiet prompt is (the app's own instruction after
// the chat's last reply: memory.Instructed), and the three differ only in
// the instruction's words, which the user edits; so it stores nothing,
// as they do. The chat's next turn resends the reply joined with its
// continuation (after SillyTavern's continue_postfix, a space), which
// supersedes the reply stored: the conversation ends holding each
// message once, the joined reply in the partial one's place — on both
// stores, streamed and not.
func TestContinueNudgeIsJoinedOnTheNextTurn(t *testing.T) {
	up := upstreamtest.New(t, continuingUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "nudge-" + strings.ReplaceAll(name, "+", "-")
			c := &windowChat{t: t, url: g.URL, user: user, keep: 100}
			ack := func(s string) string { return "ack: " + s }
			c.say("tell me of a dragon", ack)
			x := c.say("and of a knight", ack)
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: x}
			waitStored(t, g, id, 4)
			// Continue: the reply with the postfix, then the nudge.
			last := c.history[len(c.history)-1]
			last["content"] = fmt.Sprint(last["content"], " ")
			sent := append([]map[string]any{{"role": "system", "content": "You are a helpful companion."}}, c.history...)
			sent = append(sent, map[string]any{"role": "system", "content": "[Continue your last message without repeating its original content.]"})
			if conv := bodyUserChat(t, g.URL, user, true, sent); conv != x {
				t.Fatalf("the continue answered in %q, want %q", conv, x)
			}
			last["content"] = fmt.Sprint(last["content"], " (more on and of a knight)")
			c.goesOn(x, 3, 3, ack)
			assertLive(t, g, id, c.said(), 1)
			assertConversations(t, g, user, map[string]int{x: len(c.history)})
		})
	}
}

// assertLive waits until conversation id holds want live, in order, and
// checks that superseded of its messages were superseded.
func assertLive(t *testing.T, g *testGateway, id memory.Identity, want []string, superseded int) {
	t.Helper()
	waitStored(t, g, id, len(want))
	if live, n := liveAndSuperseded(t, g, id); strings.Join(live, "\n") != strings.Join(want, "\n") || n != superseded {
		t.Fatalf("%s holds (%d superseded, want %d):\n%s\nwant:\n%s",
			id.Conversation, n, superseded, strings.Join(live, "\n"), strings.Join(want, "\n"))
	}
}
