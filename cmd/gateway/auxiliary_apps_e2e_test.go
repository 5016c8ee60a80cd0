package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// chatboxTitle is Chatbox's title request (src/renderer/packages/prompts.ts
// nameConversation, sent after the chat's first reply): the chat's first
// messages, each cut to its first 100 characters and set apart by a
// dashed line, inside a code fence, with instructions before and after.
func chatboxTitle(msgs ...string) string {
	cut := make([]string, len(msgs))
	for i, m := range msgs {
		cut[i] = string([]rune(m)[:min(100, len([]rune(m)))])
	}
	return "Based on the chat history, give this conversation a name.\nKeep it short - 10 words max, no quotes.\nUse English.\n" +
		"Just provide the name, nothing else.\n\nHere's the conversation:\n\n```\n" + strings.Join(cut, "\n\n---------\n\n") +
		"\n```\n\nName this conversation in 10 characters or less.\nUse English.\nOnly give the name, nothing else.\n\nThe name is:"
}

// lobeChatTitleZH is the older LobeChat's title request (src/chains/
// summaryTitle.ts, in Chinese): a system prompt, then one user message
// holding the chat as "role: content" lines and the instructions after.
func lobeChatTitleZH(lines ...string) []map[string]any {
	return []map[string]any{
		{"role": "system", "content": "你是一名擅长会话的助理，你需要将用户的会话总结为 10 个字以内的标题"},
		user(strings.Join(lines, "\n") + "\n\n请总结上述对话为10个字以内的标题，不需要包含标点符号，输出语言语种为：zh-CN"),
	}
}

// TestAppRequestsAfterTheTranscriptAreNotTurns replays, through `gateway
// serve`, a user whose apps resend their history (a first chat of two
// turns shows it): Chatbox's title request (the first exchange cut to 100
// characters per message, instructions after it), the older LobeChat's
// Chinese title request (system prompt, transcript, instructions after)
// and Open WebUI's search-query request (the transcript going on with the
// next message, asked before it is answered). Each goes upstream as sent
// — no memory injected into a user with memory — and is marked
// X-Memory-Auxiliary: transcript; nothing of it is stored. Real turns that
// quote the exchange are stored: a newest-only user pasting their last
// exchange and asking for a summary, a user asking for a title of their
// essay, a user quoting the exchange with words of their own between its
// two messages.
func TestAppRequestsAfterTheTranscriptAreNotTurns(t *testing.T) {
	long := " Kyoto is busiest in April, so book early; mornings are cool and afternoons warm, so pack layers and good shoes."
	up := upstreamtest.New(t, answeringUpstream(func(last string) string { return "Noted: " + last + long }))
	url, _ := mustServe(t, up)
	const ana, bob = "apps-ana", "apps-bob"
	reply := func(said string) string { return "Noted: " + said + long }
	turn := func(who string, msgs ...map[string]any) chatResult {
		t.Helper()
		r := chat(t, url, map[string]string{"X-Memory-User": who}, true, msgs...)
		if r.Status != http.StatusOK || r.Header.Get("X-Memory-Auxiliary") != "" {
			t.Fatalf("turn: status %d, X-Memory-Auxiliary %q: %s", r.Status, r.Header.Get("X-Memory-Auxiliary"), r.Body)
		}
		return r
	}
	// aux sends an app's request about the chat and checks it went
	// upstream as sent, marked, in no conversation.
	aux := func(what string, msgs ...map[string]any) {
		t.Helper()
		r := chat(t, url, map[string]string{"X-Memory-User": ana}, false, msgs...)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", what, r.Status, r.Body)
		}
		if got := r.Header.Get("X-Memory-Auxiliary"); got != "transcript" || r.Header.Get("X-Memory-Conversation") != "" {
			t.Errorf("%s: X-Memory-Auxiliary %q, conversation %q; want transcript and none", what, got, r.Header.Get("X-Memory-Conversation"))
		}
		var sent struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(lastChat(t, up).Body, &sent); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(msgs)
		var wantMsgs []map[string]any
		json.Unmarshal(want, &wantMsgs)
		if !reflect.DeepEqual(sent.Messages, wantMsgs) {
			t.Errorf("%s went upstream as %v, want the client's messages", what, sent.Messages)
		}
	}

	// A first chat of two turns: ana's app resends its history.
	a1, a2 := "I am planning a trip to Kyoto in April with my sister.", "We like temples and gardens."
	turn(ana, user(a1))
	turn(ana, user(a1), assistant(reply(a1)), user(a2))
	// A Chatbox chat: its title after the first reply, which is longer
	// than the 100 characters Chatbox quotes.
	b1 := "What should I pack for a week of hiking in the Alps in June?"
	turn(ana, user(b1))
	aux("Chatbox's title", user(chatboxTitle(b1, reply(b1))))
	// An older LobeChat chat, in Chinese: its title request.
	c1 := "我下个月要去京都，想看寺庙和庭园，有什么推荐？"
	turn(ana, map[string]any{"role": "system", "content": "你是一个旅行助手。"}, user(c1))
	aux("LobeChat's Chinese title", lobeChatTitleZH("user: "+c1, "assistant: "+reply(c1))...)
	// An Open WebUI chat with web search: the search-query request sent
	// before the second turn is answered.
	d1, d2 := "Which bullet train goes from Tokyo to Kyoto and how long does it take?", "And how much is the ticket?"
	turn(ana, user(d1))
	aux("Open WebUI's search queries", user(strings.Replace(owuiQueries, "%s", owuiTranscript([]map[string]any{user(d1), assistant(reply(d1)), user(d2)}, 6), 1)))
	chatD := turn(ana, user(d1), assistant(reply(d1)), user(d2)).Header.Get("X-Memory-Conversation")

	// Real turns quoting the exchange.
	essay := "Give me a title for my essay about the bullet train from Tokyo to Kyoto and how long it takes."
	turn(ana, user(essay))
	between := "I asked you: " + d2 + "\nand you answered me: " + reply(d2) + "\nCan you say that in one line?"
	turn(ana, user(between))
	b2 := "My sister Alice lives in Porto and works as a nurse at the hospital."
	turn(bob, user(b2))
	pasted := "user: " + b2 + "\nassistant: " + reply(b2) + "\n\nCan you summarize this conversation for me?"
	turn(bob, user(pasted))

	waitConversation(t, url, ana, chatD, []string{"user: " + d1, "assistant: " + reply(d1), "user: " + d2, "assistant: " + reply(d2)})
	waitConversation(t, url, bob, memory.DefaultConversation, []string{"user: " + b2, "assistant: " + reply(b2), "user: " + pasted, "assistant: " + reply(pasted)})
	var stored []string
	eventually(t, "ana's turns quoting the exchange stored", func() bool {
		stored = stored[:0]
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if apiCall(t, http.MethodGet, url+"/v1/memory/conversations?user="+ana, nil, nil, &list) != 200 {
			return false
		}
		for _, c := range list.Data {
			var got struct {
				Messages []memory.Message `json:"messages"`
			}
			apiCall(t, http.MethodGet, url+"/v1/memory/conversations/"+c.ID+"?user="+ana, nil, nil, &got)
			for _, m := range got.Messages {
				stored = append(stored, m.Role+": "+m.Content)
			}
		}
		all := strings.Join(stored, "\n")
		return strings.Contains(all, "user: "+essay) && strings.Contains(all, "user: "+between)
	})
	for _, m := range stored {
		for _, mark := range []string{"Name this conversation", "请总结上述对话", "### Task", "chat_history"} {
			if strings.Contains(m, mark) {
				t.Errorf("stored a request about the chat or its answer: %.80q", m)
			}
		}
	}
}
