package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// claudeMessages are the messages of an Anthropic request body, as far as
// these tests read them.
type claudeMessages struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// toolUseIDs returns the ids of the tool_use blocks in content (an
// Anthropic message's content).
func toolUseIDs(content json.RawMessage) []string {
	var blocks []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	_ = json.Unmarshal(content, &blocks)
	var ids []string
	for _, b := range blocks {
		if b.Type == "tool_use" {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// claudeTools declares the Messages API tool the fake provider calls.
const claudeTools = `"tools":[{"name":"get_weather","description":"Current weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`

// postClaude posts messages to the gateway's /v1/messages with headers h,
// declaring claudeTools when withTools, and returns the status and body.
func postClaude(t *testing.T, gw string, h map[string]string, withTools bool, messages string) (int, []byte) {
	t.Helper()
	rest := `"model":"claude-sonnet-4-5","max_tokens":256,`
	if withTools {
		rest += claudeTools + ","
	}
	return postJSON(t, gw+"/v1/messages", `{`+rest+`"messages":[`+messages+`]}`, h)
}

// askClaude posts messages with claudeTools and returns the reply's
// content and its tool_use ids, of which it wants calls.
func askClaude(t *testing.T, gw string, h map[string]string, messages string, calls int) (json.RawMessage, []string) {
	t.Helper()
	status, b := postClaude(t, gw, h, true, messages)
	if status != http.StatusOK {
		t.Fatalf("the question: %d %s", status, b)
	}
	var reply struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		t.Fatal(err)
	}
	ids := toolUseIDs(reply.Content)
	if len(ids) != calls {
		t.Fatalf("the reply holds %d tool calls, want %d: %s", len(ids), calls, b)
	}
	return reply.Content, ids
}

// TestAnthropicNewestOnlyToolResultWithText: a Claude client that sends
// only its newest message (X-Memory-Conversation) answers a stored tool
// call with one user message holding its tool_result blocks and, often,
// text asking on ([tool_result, text]). memgate must read that as the
// client's newest turn, not as a resent history, and prepend the stored
// conversation — the earlier exchange and the assistant turn holding the
// tool_use blocks — so that Anthropic gets every tool_use answered by the
// tool_result blocks of the next message (the fake refuses a tool_result
// without its tool_use, as the API does). With parallel tool use, every
// call is replayed and answered. A client that resends the question and
// the call itself (full history) gets neither twice.
func TestAnthropicNewestOnlyToolResultWithText(t *testing.T) {
	fake, gw, headers, _ := claudeGateway(t, "")
	post := func(h map[string]string, withTools bool, messages string) (int, []byte) {
		t.Helper()
		return postClaude(t, gw, h, withTools, messages)
	}
	lastSent := func() claudeMessages {
		t.Helper()
		reqs := fake.Requests()
		var s claudeMessages
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	const question = `{"role":"user","content":"What is the weather in Porto?"}`
	// as returns a Claude client's headers for user in conv (none: no
	// X-Memory-Conversation).
	as := func(user, conv string) map[string]string {
		h := map[string]string{}
		for k, v := range headers {
			h[k] = v
		}
		h["X-Memory-User"] = user
		delete(h, "X-Memory-Conversation")
		if conv != "" {
			h["X-Memory-Conversation"] = conv
		}
		return h
	}
	ask := func(h map[string]string, messages string, calls int) (json.RawMessage, []string) {
		t.Helper()
		return askClaude(t, gw, h, messages, calls)
	}
	for _, tc := range []struct {
		name  string
		calls int  // tool_use blocks in the reply
		text  bool // the results' message asks on in a text block
		full  bool // the client resends its question and the call (no earlier exchange)
	}{
		{"tool_result and text", 1, true, false},
		{"tool_result only", 1, false, false},
		{"parallel tool_results and text", 3, true, false},
		{"parallel tool_results only", 2, false, false},
		{"full history, tool_result and text", 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv := "claude-toolresult-" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			h := as("ana", conv)
			h["X-Memory-Cross"] = "off" // the other cases' questions are not recalled
			fake.ToolUses(tc.calls)
			t.Cleanup(func() { fake.ToolUses(1) })

			stored := 0
			if !tc.full {
				if status, b := post(h, false, `{"role":"user","content":"I live in Lisbon and I cycle to work."}`); status != http.StatusOK {
					t.Fatalf("first exchange: %d %s", status, b)
				}
				stored = 2
				eventually(t, "the first exchange to be stored", func() bool { return storedCount(t, gw, "ana", conv) == stored })
			}
			content, ids := ask(h, question, tc.calls)
			stored += 2
			eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ana", conv) == stored })

			var blocks []string
			for i, id := range ids {
				blocks = append(blocks, fmt.Sprintf(`{"type":"tool_result","tool_use_id":%q,"content":"%dC and sunny"}`, id, 18+i))
			}
			if tc.text {
				blocks = append(blocks, `{"type":"text","text":"Should I take an umbrella on my bike?"}`)
			}
			results := `{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`
			client := results
			if tc.full {
				client = question + `,{"role":"assistant","content":` + string(content) + `},` + results
			}
			if status, b := post(h, true, client); status != http.StatusOK {
				t.Fatalf("the tool results went upstream without the call they answer (%d): %s", status, b)
			}
			sent := lastSent()
			n := len(sent.Messages)
			if n < 3 || sent.Messages[n-2].Role != "assistant" {
				t.Fatalf("upstream got %d messages, want the call's assistant turn before the results: %+v", n, sent.Messages)
			}
			if got := toolUseIDs(sent.Messages[n-2].Content); strings.Join(got, ",") != strings.Join(ids, ",") {
				t.Errorf("the turn before the results calls %q, want %q", got, ids)
			}
			all := ""
			calls := 0
			for _, m := range sent.Messages {
				all += string(m.Content) + "\n"
				calls += len(toolUseIDs(m.Content))
			}
			if calls != tc.calls {
				t.Errorf("upstream holds %d tool_use blocks, want %d (each once):\n%s", calls, tc.calls, all)
			}
			if c := strings.Count(all, "What is the weather in Porto?"); c != 1 {
				t.Errorf("the question went upstream %d times, want once:\n%s", c, all)
			}
			if !tc.full && !strings.Contains(string(sent.Messages[0].Content), "I live in Lisbon") {
				t.Errorf("the earlier exchange was not prepended:\n%s", all)
			}
			if tc.full && n != 3 {
				t.Errorf("a full-history client's request went with %d messages, want its 3:\n%s", n, all)
			}
			if tc.text && !strings.Contains(string(sent.Messages[n-1].Content), "umbrella") {
				t.Errorf("the client's question is not in the last message:\n%s", all)
			}
			eventually(t, "the tool results and the answer to be stored", func() bool { return storedCount(t, gw, "ana", conv) > stored })
			if tc.full {
				return
			}
			// The next newest-only message gets the stored loop replayed,
			// its results and question as one user message after the call.
			if status, b := post(h, true, `{"role":"user","content":"Thanks!"}`); status != http.StatusOK {
				t.Fatalf("the stored tool loop was replayed against the API's rules (%d): %s", status, b)
			}
			all, calls = "", 0
			for _, m := range lastSent().Messages {
				all += string(m.Content) + "\n"
				calls += len(toolUseIDs(m.Content))
			}
			if calls != tc.calls || strings.Count(all, `"tool_result"`) != tc.calls {
				t.Errorf("the next request replays %d tool_use blocks and %d results, want %d of each:\n%s", calls, strings.Count(all, `"tool_result"`), tc.calls, all)
			}
			if tc.text && strings.Count(all, "umbrella on my bike") != 1 {
				t.Errorf("the question asked with the results is replayed %d times, want once:\n%s", strings.Count(all, "umbrella on my bike"), all)
			}
		})
	}

	// A full-history client naming no conversation: its tool loop's
	// request ([question, call, results and text]) goes in default, where
	// its first turn was stored, and its next request, which resends a
	// reply, derives the chat's conversation and takes every turn with it:
	// one conversation holding each message once.
	t.Run("full history without a conversation header", func(t *testing.T) {
		h := as("cara", "")
		content, ids := ask(h, question, 1)
		eventually(t, "the first turn to be stored", func() bool { return storedCount(t, gw, "cara", "default") == 2 })
		history := question + `,{"role":"assistant","content":` + string(content) + `},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + ids[0] + `","content":"18C and sunny"},{"type":"text","text":"Should I take an umbrella?"}]}`
		if status, b := post(h, true, history); status != http.StatusOK {
			t.Fatalf("the tool loop: %d %s", status, b)
		}
		if n := len(lastSent().Messages); n != 3 {
			t.Errorf("the tool loop went with %d messages, want the client's 3", n)
		}
		eventually(t, "the tool loop to be stored", func() bool { return storedCount(t, gw, "cara", "default") == 5 })
		status, b := post(h, true, history+`,{"role":"assistant","content":[{"type":"text","text":"The tool says: 18C and sunny."}]},{"role":"user","content":"Thanks!"}`)
		if status != http.StatusOK {
			t.Fatalf("the next question: %d %s", status, b)
		}
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		eventually(t, "one conversation holding the chat's 7 messages", func() bool {
			apiCall(t, http.MethodGet, gw+"/v1/memory/conversations?user=cara", nil, nil, &list)
			return len(list.Data) == 1 && list.Data[0].ID != "default" && storedCount(t, gw, "cara", list.Data[0].ID) == 7
		})
	})

	// Another user answering ana's call id, in a conversation of the same
	// name: nothing of ana's goes upstream with it (her call is hers; the
	// provider refuses a result that answers no call of this request).
	t.Run("another user's call id", func(t *testing.T) {
		conv := "claude-toolresult-owner"
		_, ids := ask(as("ana", conv), question, 1)
		eventually(t, "ana's tool call to be stored", func() bool { return storedCount(t, gw, "ana", conv) == 2 })
		h := as("bob", conv)
		before := len(fake.Requests())
		post(h, true, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+ids[0]+`","content":"18C"},{"type":"text","text":"Umbrella?"}]}`)
		if len(fake.Requests()) == before {
			return // not forwarded: nothing of ana's went either
		}
		sent := lastSent()
		for _, m := range sent.Messages {
			if len(toolUseIDs(m.Content)) > 0 || strings.Contains(string(m.Content), "weather in Porto") {
				t.Errorf("bob's request went upstream with ana's call: %s", m.Content)
			}
		}
	})
}

// TestResponsesNewestOnlyOutputWithMessage: the Responses API's form of the
// same turn — a client that sends only its newest input items, the
// function_call_output answering a stored call and a message asking on —
// gets the stored call (and the conversation before it) prepended, so the
// provider finds the call its output answers (the fake refuses an output
// without its call, as the API does); a client that resends the call
// itself does not get it twice.
func TestResponsesNewestOnlyOutputWithMessage(t *testing.T) {
	fake, gw := serveRecallDialects(t)
	const tools = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "newest only", true: "full history"}[full], func(t *testing.T) {
			conv := map[bool]string{false: "resp-output-newest", true: "resp-output-full"}[full]
			h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ana", "X-Memory-Conversation": conv, "X-Memory-Cross": "off"}
			post := func(withTools bool, input string) (int, []byte) {
				t.Helper()
				rest := `"model":"gpt-4.1",`
				if withTools {
					rest += tools + ","
				}
				return postJSON(t, gw+"/v1/responses", `{`+rest+`"input":[`+input+`]}`, h)
			}
			stored := 0
			if !full {
				if status, b := post(false, `{"role":"user","content":"I live in Lisbon and I cycle to work."}`); status != http.StatusOK {
					t.Fatalf("first exchange: %d %s", status, b)
				}
				stored = 2
				eventually(t, "the first exchange to be stored", func() bool { return storedCount(t, gw, "ana", conv) == stored })
			}
			const question = `{"role":"user","content":"What is the weather in Porto?"}`
			status, b := post(true, question)
			if status != http.StatusOK {
				t.Fatalf("the question: %d %s", status, b)
			}
			var reply struct {
				Output []json.RawMessage `json:"output"`
			}
			if err := json.Unmarshal(b, &reply); err != nil {
				t.Fatal(err)
			}
			var callID string
			var items []string
			for _, it := range reply.Output {
				var v struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
				}
				_ = json.Unmarshal(it, &v)
				if v.Type == "function_call" {
					callID = v.CallID
				}
				items = append(items, string(it))
			}
			if callID == "" {
				t.Fatalf("the reply holds no function call: %s", b)
			}
			stored += 2
			eventually(t, "the call to be stored", func() bool { return storedCount(t, gw, "ana", conv) == stored })

			input := `{"type":"function_call_output","call_id":"` + callID + `","output":"18C and sunny"},{"role":"user","content":"Should I take an umbrella on my bike?"}`
			if full {
				input = question + "," + strings.Join(items, ",") + "," + input
			}
			if status, b := post(true, input); status != http.StatusOK {
				t.Fatalf("the output went upstream without the call it answers (%d): %s", status, b)
			}
			reqs := fake.Requests()
			body := reqs[len(reqs)-1].Body
			calls, outputs := responsesCallIDs(t, body)
			if len(calls) != 1 || calls[0] != callID || len(outputs) != 1 || outputs[0] != callID {
				t.Errorf("upstream calls %q and outputs %q, want the call %s once and its output:\n%s", calls, outputs, callID, body)
			}
			if c := strings.Count(string(body), "What is the weather in Porto?"); c != 1 {
				t.Errorf("the question went upstream %d times, want once:\n%s", c, body)
			}
			if !full && !strings.Contains(string(body), "I live in Lisbon") {
				t.Errorf("the earlier exchange was not prepended:\n%s", body)
			}
		})
	}
}

// TestChatNewestOnlyToolResultsWithQuestion: on chat completions, a client
// that sends only what is new answers a stored call (here one made through
// the Messages API: one memory serves every API) with its tool message and
// a user message asking on, [tool, user]. The stored call goes before them,
// and the client's messages go upstream whole (the tool message was left
// out when [tool, user] was read as a resent history), the call right
// before the tool message answering it, as chat's rules require.
func TestChatNewestOnlyToolResultsWithQuestion(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	openai := upstreamtest.New(t, chatAndResponses(fake, recallUpstream()))
	gw := serveDialects(t, openai.URL(), fake.URL+"/v1")
	claude := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-User": "ana", "X-Memory-Conversation": "chat-toolresult"}
	_, ids := askClaude(t, gw, claude, `{"role":"user","content":"What is the weather in Porto?"}`, 1)
	eventually(t, "the call to be stored", func() bool { return storedCount(t, gw, "ana", "chat-toolresult") == 2 })
	chat := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ana", "X-Memory-Conversation": "chat-toolresult"}
	status, b := postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"messages":[`+
		`{"role":"tool","tool_call_id":"`+ids[0]+`","content":"18C and sunny"},{"role":"user","content":"Should I take an umbrella?"}]}`, chat)
	if status != http.StatusOK || !strings.Contains(string(b), "ack: Should I take an umbrella?") {
		t.Fatalf("the tool message went upstream without the call it answers (%d): %s", status, b)
	}
	var sent struct {
		Messages []struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	last := openai.Last(t)
	if err := json.Unmarshal(last.Body, &sent); err != nil {
		t.Fatal(err)
	}
	n := len(sent.Messages)
	if n < 3 || sent.Messages[n-1].Role != "user" || sent.Messages[n-2].ToolCallID != ids[0] ||
		len(sent.Messages[n-3].ToolCalls) != 1 || sent.Messages[n-3].ToolCalls[0].ID != ids[0] {
		t.Errorf("upstream got %s, want the stored call, then the client's tool message and question", last.Body)
	}
}
