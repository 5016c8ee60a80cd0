package main

import (
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
// tool calls and results, on chat and on the Messages API, while their
// text still goes. Run end to end: `gateway serve` on SQLite in front of
// a chat upstream and the dialecttest Anthropic provider, both strict.
func TestToolTurnsWithoutToolsOnStrictUpstream(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	fakeURL, _ := url.Parse(fake.URL)
	anthropic := httptest.NewServer(upstreamtest.RequireTools(httputil.NewSingleHostReverseProxy(fakeURL)))
	t.Cleanup(anthropic.Close)
	openai := upstreamtest.New(t, upstreamtest.RequireTools(upstreamtest.Sequence(
		upstreamtest.Chat(upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Porto"}`}}}),
		upstreamtest.Chat(upstreamtest.Reply{Content: "It is sunny in Porto."}),
	)))
	gw := serveDialects(t, openai.URL(), anthropic.URL+"/v1")

	t.Run("chat", func(t *testing.T) {
		who := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ida", "X-Memory-Conversation": "chat-tools"}
		const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
		status, b := postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[{"role":"user","content":"Weather in Porto?"}]}`, who)
		if status != 200 {
			t.Fatalf("chat 1: %d %s", status, b)
		}
		eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", "chat-tools") >= 2 })
		status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\"}"}}]},`+
			`{"role":"tool","tool_call_id":"call_1","content":"sunny, 24C"}]}`, who)
		if status != 200 {
			t.Fatalf("chat 2: %d %s", status, b)
		}
		eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", "chat-tools") >= 4 })

		status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model","messages":[{"role":"user","content":"Thanks!"}]}`, who)
		if status != 200 {
			t.Fatalf("chat without tools: %d %s", status, b)
		}
		sent := string(openai.Last(t).Body)
		if strings.Contains(sent, "tool_call") || !strings.Contains(sent, "Weather in Porto?") || !strings.Contains(sent, "It is sunny in Porto.") {
			t.Errorf("chat without tools: want the stored text without tool calls or results, sent:\n%s", sent)
		}
	})

	t.Run("messages", func(t *testing.T) {
		who := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-User": "ida", "X-Memory-Conversation": "claude-tools"}
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
		eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", "claude-tools") >= 2 })
		status, b = postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,`+tools+`,"messages":[`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+useID+`","content":"sunny, 24C"}]}]}`, who)
		if status != 200 {
			t.Fatalf("messages 2: %d %s", status, b)
		}
		eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", "claude-tools") >= 4 })

		status, b = postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"Thanks!"}]}`, who)
		if status != 200 {
			t.Fatalf("messages without tools: %d %s", status, b)
		}
		reqs := fake.Requests()
		sent := string(reqs[len(reqs)-1].Body)
		if strings.Contains(sent, `"tool_use"`) || strings.Contains(sent, `"tool_result"`) ||
			!strings.Contains(sent, "Let me check the weather.") || !strings.Contains(sent, "The tool says: sunny, 24C.") {
			t.Errorf("messages without tools: want the stored text without tool blocks, sent:\n%s", sent)
		}
	})
}
