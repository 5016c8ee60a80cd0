package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
)

// idlessToolUpstream is a lenient chat provider that sends tool calls
// without an id: a request offering tools whose last message is the
// user's gets a call of get_weather with no id; any other gets a text
// answer. It records the bodies it was sent.
type idlessToolUpstream struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (u *idlessToolUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, b)
	u.mu.Unlock()
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(b, &req)
	msg := `{"role":"assistant","content":"It is sunny in Porto."}`
	if len(req.Tools) > 0 && len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "user" {
		msg = `{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\"}"}}]}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"local-model","choices":[{"index":0,"message":`+msg+`,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`)
}

// last returns the last body the provider was sent.
func (u *idlessToolUpstream) last() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1]
}

// storedCount is the number of messages stored in a conversation, through
// the management API.
func storedCount(t *testing.T, gw, user, conv string) int {
	t.Helper()
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/"+conv+"?user="+user, nil, nil, nil) != http.StatusOK {
		return 0
	}
	apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/"+conv+"?user="+user, nil, nil, &body)
	return len(body.Messages)
}

// TestToolCallWithoutIDReplaysOnEveryAPI: a chat provider that sends tool
// calls without an id (stored as they came) must not break the later
// requests of the conversation on the APIs that require one. The
// conversation's stored tool call and its result are replayed (each later
// request declares tools: to one that declares none, no tool turn is, see
// TestToolTurnsWithoutToolsOnStrictUpstream), with one id they share, to
// the Responses API (which rejects a function_call
// without call_id: every later request failed), to the Messages API (which
// rejects a tool_use without id: the pair was dropped) and to chat. Run
// end to end: `gateway serve` on SQLite in front of the dialecttest fake
// provider (Messages, Responses), which enforces the providers' rules.
func TestToolCallWithoutIDReplaysOnEveryAPI(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	chatUp := &idlessToolUpstream{}
	openai := httptest.NewServer(chatAndResponses(fake, chatUp))
	t.Cleanup(openai.Close)
	gw := serveDialects(t, openai.URL+"/v1", fake.URL+"/v1")
	who := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ida", "X-Memory-Conversation": "tools"}
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`

	// The provider answers with an id-less call; the client runs it and
	// sends the result back (newest turn only, as the call came).
	status, b := postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[{"role":"user","content":"Weather in Porto?"}]}`, who)
	if status != 200 {
		t.Fatalf("chat 1: %d %s", status, b)
	}
	eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", "tools") >= 2 })
	status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[`+
		`{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\"}"}}]},`+
		`{"role":"tool","content":"sunny, 24C"}]}`, who)
	if status != 200 {
		t.Fatalf("chat 2: %d %s", status, b)
	}
	eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", "tools") >= 4 })

	// Responses: the stored call and output share a call_id.
	status, b = postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"input":"And tomorrow?"}`, who)
	if status != 200 {
		t.Fatalf("responses: the replayed tool call was refused (%d): %s", status, b)
	}
	reqs := fake.Requests()
	callIDs, outputIDs := responsesCallIDs(t, reqs[len(reqs)-1].Body)
	if len(callIDs) != 1 || callIDs[0] == "" || len(outputIDs) != 1 || outputIDs[0] != callIDs[0] {
		t.Errorf("responses replayed calls %q and outputs %q, want one pair with one id:\n%s", callIDs, outputIDs, reqs[len(reqs)-1].Body)
	}

	// Messages: the pair is replayed, not dropped.
	claude := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-User": "ida", "X-Memory-Conversation": "tools"}
	status, b = postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"And the day after?"}]}`, claude)
	if status != 200 {
		t.Fatalf("messages: %d %s", status, b)
	}
	reqs = fake.Requests()
	sent := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(sent, `"tool_use"`) || !strings.Contains(sent, `"tool_result"`) || !strings.Contains(sent, "sunny, 24C") {
		t.Errorf("messages: the stored tool call and its result were not replayed:\n%s", sent)
	}

	// Chat: the replayed call and result share a non-empty id.
	status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":[{"role":"user","content":"Thanks!"}]}`, who)
	if status != 200 {
		t.Fatalf("chat 3: %d %s", status, b)
	}
	var chatReq struct {
		Messages []struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID *string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(chatUp.last(), &chatReq); err != nil {
		t.Fatal(err)
	}
	var ids, answers []string
	for _, m := range chatReq.Messages {
		for _, c := range m.ToolCalls {
			ids = append(ids, c.ID)
		}
		if m.ToolCallID != nil {
			answers = append(answers, *m.ToolCallID)
		}
	}
	if len(ids) != 1 || ids[0] == "" || len(answers) != 1 || answers[0] != ids[0] {
		t.Errorf("chat replayed calls %q answered by %q, want one pair with one id:\n%s", ids, answers, chatUp.last())
	}
}

// responsesCallIDs returns the call_ids of a Responses request's
// function_call items and of its function_call_output items, in order.
func responsesCallIDs(t *testing.T, body []byte) (calls, outputs []string) {
	t.Helper()
	var in struct {
		Input []struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	for _, it := range in.Input {
		switch it.Type {
		case "function_call":
			calls = append(calls, it.CallID)
		case "function_call_output":
			outputs = append(outputs, it.CallID)
		}
	}
	return calls, outputs
}
