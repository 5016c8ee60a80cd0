package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// Open WebUI's default task prompts (backend/open_webui/config.py), cut
// to their first and last lines: the client fills {{MESSAGES:END:n}}
// with the chat's last n messages as "ROLE: content" lines
// (utils/misc.py get_messages_content) and sends the whole as one user
// message, with "stream": false and max_completion_tokens (metadata is
// popped before the request leaves Open WebUI).
const (
	owuiTitle = "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n" +
		"### Guidelines:\n- The title should clearly represent the main theme or subject of the conversation.\n" +
		"### Output:\nJSON format: { \"title\": \"your concise title here\" }\n" +
		"### Chat History:\n<chat_history>\n%s\n</chat_history>"
	owuiFollowUps = "### Task:\nSuggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next in this conversation as a **user**, based on the chat history, to help continue or deepen the discussion.\n" +
		"### Output:\nJSON format: { \"follow_ups\": [\"Question 1?\", \"Question 2?\", \"Question 3?\"] }\n" +
		"### Chat History:\n<chat_history>\n%s\n</chat_history>"
	owuiQueries = "### Task:\nAnalyze the chat history to determine the necessity of generating search queries, in the given language.\n" +
		"### Output:\nStrictly return in JSON format: { \"queries\": [\"query1\", \"query2\"] }\n" +
		"### Chat History:\n<chat_history>\n%s\n</chat_history>"
	owuiTags = "### Task:\nGenerate 1-3 broad tags categorizing the main themes of the chat history, along with 1-3 more specific subtopic tags.\n" +
		"### Output:\nJSON format: { \"tags\": [\"tag1\", \"tag2\", \"tag3\"] }\n" +
		"### Chat History:\n<chat_history>\n%s\n</chat_history>"
)

// owuiTranscript renders the last n of msgs as Open WebUI's
// {{MESSAGES:END:n}} does.
func owuiTranscript(msgs []map[string]any, n int) string {
	if len(msgs) > n {
		msgs = msgs[len(msgs)-n:]
	}
	var lines []string
	for _, m := range msgs {
		lines = append(lines, strings.ToUpper(m["role"].(string))+": "+m["content"].(string))
	}
	return strings.Join(lines, "\n")
}

// postBody posts a chat completion body as given, with headers, and
// fails the test unless it is answered 200.
func postBody(t *testing.T, url string, headers map[string]string, body map[string]any) chatResult {
	t.Helper()
	r := sendChatBody(t, url, headers, body)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return r
}

// TestOpenWebUITaskRequestsAreNotTurns replays a short Open WebUI session
// through the gateway, with no memgate header but the user's: three chat
// turns (the whole history resent, streamed) and, after each reply, the
// client's own task requests (title after the first, follow-ups and tags
// after each), one user message quoting the chat's last messages, the
// newest reply last. The task requests are answered as sent (no memory
// block, no stored turn prepended) and marked X-Memory-Auxiliary:
// transcript; the user's memory holds the chat's six messages in one
// conversation and nothing of those task prompts or their answers. The
// search-query requests Open WebUI sends before each later turn is
// answered quote the newest exchange and then that turn's message, which
// memgate has not seen yet: told once the user has been seen resending
// their history (the second turn), so the one before the third turn is
// told, while the one before the second turn is stored as before, a
// conversation of its own (left out: see transcripts). A newest-only client's turn that quotes one earlier
// message of the user (one role only) is still a turn, and stored.
func TestOpenWebUITaskRequestsAreNotTurns(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			who := "owui-" + strings.ReplaceAll(name, "+", "-")
			h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": who}
			task := func(tmpl string, history []map[string]any, n int) chatResult {
				content := strings.Replace(tmpl, "%s", owuiTranscript(history, n), 1)
				res := postBody(t, g.URL, h, map[string]any{
					"model": "gpt-4o-mini", "stream": false, "max_completion_tokens": 1000,
					"messages": []map[string]any{{"role": "user", "content": content}},
				})
				if tmpl == owuiQueries && len(history) < 4 {
					// The exchange, then the next turn's message, of a
					// user not yet seen resending: stored.
					if got := res.Header.Get("X-Memory-Auxiliary"); got != "" {
						t.Errorf("the first search-query request: X-Memory-Auxiliary %q, want none", got)
					}
					return res
				}
				if got := res.Header.Get("X-Memory-Auxiliary"); got != "transcript" {
					t.Errorf("%.40q: X-Memory-Auxiliary %q, want transcript", content, got)
				}
				// Answered as sent: the one message, nothing injected.
				var sent struct {
					Messages []map[string]any `json:"messages"`
				}
				if err := json.Unmarshal(lastChat(t, up).Body, &sent); err != nil {
					t.Fatal(err)
				}
				if len(sent.Messages) != 1 || sent.Messages[0]["content"] != content {
					t.Errorf("%.40q went upstream as %d messages, want the client's one: %v", content, len(sent.Messages), sent.Messages)
				}
				return res
			}

			var history []map[string]any
			var convs []string
			queries := ""
			for _, text := range []string{"I am planning a trip to Kyoto in April.", "My budget is two thousand euros.", "Which temples should we see first?"} {
				history = append(history, user(text))
				if len(history) > 1 {
					// With web search on, Open WebUI asks for search
					// queries before the turn is answered.
					if conv := task(owuiQueries, history, 6).Header.Get("X-Memory-Conversation"); len(history) < 4 {
						queries = conv
					}
				}
				res := postBody(t, g.URL, h, map[string]any{"model": "gpt-4o-mini", "stream": true, "messages": history})
				if res.Header.Get("X-Memory-Auxiliary") != "" {
					t.Fatalf("chat turn %q marked auxiliary", text)
				}
				convs = append(convs, res.Header.Get("X-Memory-Conversation"))
				history = append(history, assistant("ack: "+text))
				if len(history) == 2 {
					task(owuiTitle, history, 2)
				}
				task(owuiFollowUps, history, 6)
				task(owuiTags, history, 6)
			}
			derived := convs[1]
			if convs[2] != derived {
				t.Errorf("the third turn in %s, want %s", convs[2], derived)
			}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: derived}
			waitStored(t, g, id, 6)
			got, _ := storedContents(t, g, id)
			want := []string{
				"user: I am planning a trip to Kyoto in April.", "assistant: ack: I am planning a trip to Kyoto in April.",
				"user: My budget is two thousand euros.", "assistant: ack: My budget is two thousand euros.",
				"user: Which temples should we see first?", "assistant: ack: Which temples should we see first?",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			list, err := g.mem.store.Conversations(context.Background(), memory.DefaultTenant, who)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range list {
				msgs, _ := storedContents(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: c.ID})
				for _, m := range msgs {
					if c.ID == queries && strings.Contains(m, "search queries") {
						continue
					}
					if strings.Contains(m, "### Task") || strings.Contains(m, "<chat_history>") {
						t.Errorf("conversation %s stores a task request: %.80q", c.ID, m)
					}
				}
			}
			if len(list) != 2 || queries == "" || queries == derived || (list[0].ID != derived || list[1].ID != queries) && (list[0].ID != queries || list[1].ID != derived) {
				t.Errorf("conversations %+v, want %s and the search-query request's %q", list, derived, queries)
			}

			// Recall finds the chat's turns, never a title, tags or
			// follow-up prompt quoting them.
			eventually(t, "the Kyoto turn recalled", func() bool {
				rec, err := g.mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{
					Identity: memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: "elsewhere"},
					Text:     "Kyoto trip April budget chat history title", CrossConversation: true, Now: time.Now(),
				})
				if err != nil {
					return false
				}
				found := false
				for _, it := range rec.Items {
					if it.Conversation == queries {
						continue // the search-query request, stored
					}
					if it.Kind == "message" && it.Conversation != derived || strings.Contains(it.Text, "### Task") || strings.Contains(it.Text, "chat_history") {
						t.Fatalf("recall returned a passage of %s: %.80q", it.Conversation, it.Text)
					}
					found = found || strings.Contains(it.Text, "Kyoto")
				}
				return found
			})

			// A newest-only client's user quoting their own earlier message
			// (one role) says something new: it is a turn.
			quote := "Earlier I wrote: I am planning a trip to Kyoto in April. Make it May instead."
			res := chat(t, g.URL, map[string]string{"X-Memory-User": who, "X-Memory-Conversation": "notes"}, false, user(quote))
			if res.Header.Get("X-Memory-Auxiliary") != "" {
				t.Errorf("a user quoting one earlier message marked auxiliary")
			}
			waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: "notes"}, 2)
		})
	}
}

// TestAnthropicTitleRequestIsNotATurn: the same on the Anthropic Messages
// API, framed as LibreChat frames its title request (a system prompt, then
// one user message quoting the exchange as `||>User:` and `||>Response:`,
// the reply JSON-escaped): the title request is marked and not stored, and
// the chat (first turn alone, then its history resent) ends as one
// conversation of four messages. Run end to end: `gateway serve` in front
// of the dialecttest provider.
func TestAnthropicTitleRequestIsNotATurn(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	openai := upstreamtest.New(t, chatAndResponses(fake, upstreamtest.Chat(upstreamtest.Reply{Content: "Noted."})))
	gw := serveDialects(t, openai.URL(), fake.URL+"/v1")
	h := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-User": "lc-ana"}
	post := func(body map[string]any) http.Header {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, gw+"/v1/messages", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return resp.Header
	}
	const said = "Help me plan a vegetarian dinner for six friends on Saturday."
	reply := "You said: " + said
	history := []map[string]any{{"role": "user", "content": said}}
	if got := post(map[string]any{"model": "claude-sonnet-4-6", "max_tokens": 1024, "stream": true, "system": "You are a helpful cook.", "messages": history}); got.Get("X-Memory-Auxiliary") != "" {
		t.Fatal("the chat's first turn marked auxiliary")
	}
	quoted, _ := json.Marshal(reply)
	title := "Please generate a concise, 5-word-or-less title for the conversation, using its same language, with no punctuation.\n\n" +
		"||>User:\n\"" + said + "\"\n||>Response:\n\"" + string(quoted) + "\"\n\n||>Title:"
	got := post(map[string]any{"model": "claude-haiku-4-5", "max_tokens": 16, "system": "You are a title generator.",
		"messages": []map[string]any{{"role": "user", "content": title}}})
	if got.Get("X-Memory-Auxiliary") != "transcript" || got.Get("X-Memory-Conversation") != "" {
		t.Errorf("title request: X-Memory-Auxiliary %q, conversation %q; want transcript and none",
			got.Get("X-Memory-Auxiliary"), got.Get("X-Memory-Conversation"))
	}
	history = append(history, map[string]any{"role": "assistant", "content": reply},
		map[string]any{"role": "user", "content": "Make it gluten free too."})
	post(map[string]any{"model": "claude-sonnet-4-6", "max_tokens": 1024, "system": "You are a helpful cook.", "messages": history})

	var list struct {
		Data []struct {
			ID           string `json:"id"`
			MessageCount int    `json:"message_count"`
		} `json:"data"`
	}
	eventually(t, "the chat stored as one conversation of four messages", func() bool {
		if st := apiCall(t, http.MethodGet, gw+"/v1/memory/conversations?user=lc-ana", nil, nil, &list); st != 200 {
			t.Fatalf("conversations: %d", st)
		}
		for _, c := range list.Data {
			if c.ID != memory.DefaultConversation && c.MessageCount == 4 {
				return true
			}
		}
		return false
	})
	if len(list.Data) != 1 || list.Data[0].MessageCount != 4 || list.Data[0].ID == memory.DefaultConversation {
		t.Errorf("conversations %+v, want the chat's alone, with its 4 messages", list.Data)
	}
}

// TestPastedHistoryAppTurnsAreStored replays an app that pastes the
// conversation so far into each new user message (a LangChain-style
// template: "Human: …", "AI: …", then the new input and "AI:"), on both
// stores: each request quotes the user's newest exchange, both roles, in
// order, but goes on with the user's new words after the reply, so none
// is marked X-Memory-Auxiliary and every turn is stored, its input and
// its reply.
func TestPastedHistoryAppTurnsAreStored(t *testing.T) {
	// The reply names the new input: "Human: <input>\nAI:" ends the prompt.
	reply := func(input string) string {
		return "About " + input + " here is a careful answer with several words.\n\nEnjoy!"
	}
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		input := ""
		if n := len(req.Messages); n > 0 {
			c := strings.TrimSuffix(req.Messages[n-1].Content, "\nAI:")
			input = c[strings.LastIndex(c, "Human: ")+len("Human: "):]
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		upstreamtest.Chat(upstreamtest.Reply{Content: reply(input)}).ServeHTTP(w, r)
	}))
	inputs := []string{
		"I am planning a trip to Kyoto in April with my sister.",
		"My budget is two thousand euros.",
		"Which temples first?",
		"Is the train easy?",
	}
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			who := "pasted-" + strings.ReplaceAll(name, "+", "-")
			h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": who}
			history := ""
			for _, in := range inputs {
				prompt := "The following is a friendly conversation between a human and an AI.\n\nCurrent conversation:\n" +
					history + "Human: " + in + "\nAI:"
				res := postBody(t, g.URL, h, map[string]any{"model": "gpt-4o-mini", "messages": []map[string]any{user(prompt)}})
				if got := res.Header.Get("X-Memory-Auxiliary"); got != "" {
					t.Errorf("turn %q: X-Memory-Auxiliary %q, want none", in, got)
				}
				history += "Human: " + in + "\nAI: " + reply(in) + "\n"
			}
			eventually(t, "every turn stored", func() bool {
				list, err := g.mem.store.Conversations(context.Background(), memory.DefaultTenant, who)
				if err != nil {
					t.Fatal(err)
				}
				var all []string
				for _, c := range list {
					msgs, _ := storedContents(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: c.ID})
					all = append(all, msgs...)
				}
				joined := strings.Join(all, "\n")
				for _, in := range inputs {
					if !strings.Contains(joined, "Human: "+in+"\nAI:") || !strings.Contains(joined, "assistant: "+reply(in)) {
						return false
					}
				}
				return true
			})
		})
	}
}

// TestLibreChatSystemTitleIsNotATurn replays LibreChat on the chat
// completions API, through `gateway serve`, the user named by the body's
// "user" alone: its title request is one message of the system role (its
// default for every endpoint but Ollama's), the instructions and the
// exchange quoted as `||>User:` and `||>Response:`. It is answered as
// sent and marked X-Memory-Auxiliary: transcript, and the title it got is
// stored nowhere: the chat ends as one conversation of its four messages.
func TestLibreChatSystemTitleIsNotATurn(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	gw := serveDialects(t, up.URL(), up.URL())
	const who = "lc-system-title"
	h := map[string]string{"Authorization": "Bearer sk-test"}
	const said = "I have been a vegetarian for ten years and want high protein dinner ideas."
	history := []map[string]any{user(said)}
	if res := postBody(t, gw, h, map[string]any{"model": "gpt-4o", "stream": true, "user": who, "messages": history}); res.Header.Get("X-Memory-Auxiliary") != "" {
		t.Fatal("the chat's first turn marked auxiliary")
	}
	title := "Please generate a concise, 5-word-or-less title for the conversation, using its same language, with no punctuation.\n\n" +
		"||>User:\n\"" + said + "\"\n||>Response:\n\"ack: " + said + "\"\n\n||>Title:"
	res := postBody(t, gw, h, map[string]any{"model": "gpt-4o-mini", "user": who,
		"messages": []map[string]any{{"role": "system", "content": title}}})
	if res.Header.Get("X-Memory-Auxiliary") != "transcript" || res.Header.Get("X-Memory-Conversation") != "" {
		t.Errorf("title request: X-Memory-Auxiliary %q, conversation %q; want transcript and none",
			res.Header.Get("X-Memory-Auxiliary"), res.Header.Get("X-Memory-Conversation"))
	}
	var sent struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(lastChat(t, up).Body, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Messages) != 1 || sent.Messages[0]["content"] != title {
		t.Errorf("title request went upstream as %v, want the client's one message", sent.Messages)
	}
	history = append(history, assistant("ack: "+said), user("Something with lentils please."))
	postBody(t, gw, h, map[string]any{"model": "gpt-4o", "stream": true, "user": who, "messages": history})

	type conv struct {
		ID           string `json:"id"`
		MessageCount int    `json:"message_count"`
	}
	var list struct {
		Data []conv `json:"data"`
	}
	eventually(t, "the chat stored with its four messages", func() bool {
		if st := apiCall(t, http.MethodGet, gw+"/v1/memory/conversations?user="+who, nil, nil, &list); st != 200 {
			t.Fatalf("conversations: %d", st)
		}
		n := 0
		for _, c := range list.Data {
			n += c.MessageCount
		}
		return n >= 4
	})
	if len(list.Data) != 1 || list.Data[0].MessageCount != 4 {
		t.Errorf("conversations %+v, want the chat's alone, with its 4 messages", list.Data)
	}
	for _, c := range list.Data {
		var got struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/"+c.ID+"?user="+who, nil, nil, &got)
		for _, m := range got.Messages {
			if strings.Contains(m.Content, "||>") || strings.Contains(m.Content, "Please generate") {
				t.Errorf("conversation %s stores the title request or its answer: %s %.80q", c.ID, m.Role, m.Content)
			}
		}
	}
}
