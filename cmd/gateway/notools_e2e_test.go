package main

import (
	"cmp"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestToolTurnsWithoutToolsOnStrictUpstream: a newest-only client whose
// earlier turns used tools sends a later request without tools; memgate
// replays the stored turns before it, and an upstream that refuses tool
// blocks in a request without tools (AWS Bedrock: "The toolConfig field
// must be defined …"; upstreamtest.RequireTools) must not see the stored
// tool calls and results, while their text still goes. The text the
// assistant said before a call and its answer after the results would
// then stand side by side, two assistant messages in a row, which a
// strict upstream refuses too (the Messages API, Bedrock's Converse API,
// open models' chat templates: "roles must alternate";
// upstreamtest.RequireAlternation, dialecttest's Messages API): memgate
// joins them into one. On chat, the Messages API and the Responses API,
// end to end: `gateway serve` on SQLite in front of a chat upstream and
// the dialecttest provider, strict about tools and turn-taking.
func TestToolTurnsWithoutToolsOnStrictUpstream(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	fakeURL, _ := url.Parse(fake.URL)
	toFake := upstreamtest.RequireTools(httputil.NewSingleHostReverseProxy(fakeURL))
	anthropic := httptest.NewServer(toFake)
	t.Cleanup(anthropic.Close)
	chatUp := upstreamtest.Sequence(
		upstreamtest.Chat(upstreamtest.Reply{Content: "Let me check.", ToolCalls: []upstreamtest.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Porto"}`}}}),
		upstreamtest.Chat(upstreamtest.Reply{Content: "It is sunny in Porto."}),
	)
	openai := upstreamtest.New(t, upstreamtest.RequireAlternation(upstreamtest.RequireTools(chatAndResponses(fake, chatUp))))
	gw := serveDialects(t, openai.URL(), anthropic.URL+"/v1")
	lastSent := func() string {
		reqs := fake.Requests()
		return string(reqs[len(reqs)-1].Body)
	}
	// sends reports whether body holds each text, in order.
	sends := func(body string, texts ...string) bool {
		at := 0
		for _, s := range texts {
			i := strings.Index(body[at:], s)
			if i < 0 {
				return false
			}
			at += i + len(s)
		}
		return true
	}

	t.Run("chat", func(t *testing.T) {
		who := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ida", "X-Memory-Conversation": "chat-alt"}
		const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
		status, b := postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[{"role":"user","content":"Weather in Porto?"}]}`, who)
		if status != 200 {
			t.Fatalf("chat 1: %d %s", status, b)
		}
		eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", "chat-alt") >= 2 })
		status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[`+
			`{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\"}"}}]},`+
			`{"role":"tool","tool_call_id":"call_1","content":"sunny, 24C"}]}`, who)
		if status != 200 {
			t.Fatalf("chat 2: %d %s", status, b)
		}
		eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", "chat-alt") >= 4 })

		status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model","messages":[{"role":"user","content":"Thanks!"}]}`, who)
		if status != 200 {
			t.Fatalf("chat without tools: %d %s", status, b)
		}
		sent := string(openai.Last(t).Body)
		if strings.Contains(sent, "tool_call") || !sends(sent, "Weather in Porto?", "Let me check.", "It is sunny in Porto.", "Thanks!") {
			t.Errorf("chat without tools: want the stored text without tool calls or results, sent:\n%s", sent)
		}
	})

	t.Run("messages", func(t *testing.T) {
		who := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-User": "ida", "X-Memory-Conversation": "claude-alt"}
		const tools = `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`
		status, b := postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,`+tools+`,"messages":[{"role":"user","content":"Weather in Porto?"}]}`, who)
		if status != 200 {
			t.Fatalf("messages 1: %d %s", status, b)
		}
		var reply struct {
			Content []struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"content"`
		}
		if err := json.Unmarshal(b, &reply); err != nil {
			t.Fatalf("messages 1: %v: %s", err, b)
		}
		var useID string
		for _, c := range reply.Content {
			if c.Type == "tool_use" {
				useID = c.ID
			}
		}
		if useID == "" {
			t.Fatalf("messages 1: no tool_use in %s", b)
		}
		eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", "claude-alt") >= 2 })
		status, b = postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,`+tools+`,"messages":[`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+useID+`","content":"sunny, 24C"}]}]}`, who)
		if status != 200 {
			t.Fatalf("messages 2: %d %s", status, b)
		}
		eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", "claude-alt") >= 4 })

		status, b = postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"Thanks!"}]}`, who)
		if status != 200 {
			t.Fatalf("messages without tools: %d %s", status, b)
		}
		sent := lastSent()
		if strings.Contains(sent, `"tool_use"`) || strings.Contains(sent, `"tool_result"`) ||
			!sends(sent, "Weather in Porto?", "Let me check the weather.", "The tool says: sunny, 24C.", "Thanks!") {
			t.Errorf("messages without tools: want the stored text without tool blocks, sent:\n%s", sent)
		}
	})

	t.Run("responses", func(t *testing.T) {
		who := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ida", "X-Memory-Conversation": "responses-alt"}
		const tools = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]`
		status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1",`+tools+`,"input":"Weather in Porto?"}`, who)
		if status != 200 {
			t.Fatalf("responses 1: %d %s", status, b)
		}
		var reply struct {
			Output []struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
			} `json:"output"`
		}
		if err := json.Unmarshal(b, &reply); err != nil {
			t.Fatalf("responses 1: %v: %s", err, b)
		}
		var callID string
		for _, o := range reply.Output {
			if o.Type == "function_call" {
				callID = o.CallID
			}
		}
		if callID == "" {
			t.Fatalf("responses 1: no function_call in %s", b)
		}
		eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", "responses-alt") >= 2 })
		status, b = postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1",`+tools+`,"input":[`+
			`{"type":"function_call_output","call_id":"`+callID+`","output":"sunny, 24C"}]}`, who)
		if status != 200 {
			t.Fatalf("responses 2: %d %s", status, b)
		}
		eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", "responses-alt") >= 4 })

		status, b = postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","input":"Thanks!"}`, who)
		if status != 200 {
			t.Fatalf("responses without tools: %d %s", status, b)
		}
		sent := lastSent()
		var req struct {
			Input []struct {
				Type string `json:"type"`
				Role string `json:"role"`
			} `json:"input"`
		}
		if err := json.Unmarshal([]byte(sent), &req); err != nil {
			t.Fatalf("responses without tools: %v: %s", err, sent)
		}
		var roles []string
		for _, it := range req.Input {
			if it.Role != "developer" && it.Role != "system" { // memgate's recalled block
				roles = append(roles, cmp.Or(it.Type, "message")+":"+it.Role)
			}
		}
		if strings.Contains(sent, `"function_call`) || !sends(sent, "Weather in Porto?", "Let me check the weather.", "The tool says: sunny, 24C.", "Thanks!") ||
			strings.Join(roles, " ") != "message:user message:assistant message:user" {
			t.Errorf("responses without tools: want the stored text without function items, one user, assistant and user message each (got %v), sent:\n%s", roles, sent)
		}
	})
}
