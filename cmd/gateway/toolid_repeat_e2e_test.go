package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// numberingUpstream is a chat provider that numbers its tool calls per
// response, as some model servers do: every call it makes is "call_0". A
// request offering tools whose last message is the user's gets a call of
// get_weather; any other gets a text answer. While strict is set it
// refuses with 400 a request whose messages break the tool-call rules
// (upstreamtest.ValidateChat: a result answers its call, a call id is
// given once).
func numberingUpstream(strict *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strict.Load() {
			if err := upstreamtest.ValidateChat(b); err != nil {
				upstreamtest.Error(http.StatusBadRequest, "invalid_request_error", "", err.Error()).ServeHTTP(w, r)
				return
			}
		}
		var req struct {
			Model    string            `json:"model"`
			Tools    []json.RawMessage `json:"tools"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(b, &req)
		reply := upstreamtest.Reply{Content: "Noted."}
		if len(req.Tools) > 0 && len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "user" {
			reply = upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{{ID: "call_0", Name: "get_weather", Arguments: `{"city":"Porto"}`}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(upstreamtest.Completion(req.Model, reply))
	})
}

// chatToolIDs reads a chat request body's tool call ids and the ids its
// tool messages answer, in order.
func chatToolIDs(t *testing.T, body []byte) (calls, answers []string) {
	t.Helper()
	var req struct {
		Messages []struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID *string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		if m.ToolCallID != nil {
			answers = append(answers, *m.ToolCallID)
		}
	}
	return calls, answers
}

// TestRepeatedToolCallIDReplaysOnEveryAPI: a chat provider that numbers
// its tool calls per response ("call_0" on every turn) must not break the
// later requests of the conversation. Its stored turns are replayed (each
// later request declares tools) with distinct ids, each result paired with its call: to the Messages API
// (which refuses a tool_use id given twice: 400), to the Responses API
// (which refuses a call_id given twice: 400) and to chat (where a result
// would answer the wrong call; the fake refuses it). And while a client
// answers the newest stored call with its own result, its pair keeps
// call_0 and the older copy is renamed. Run end to end: `gateway serve`
// on SQLite in front of the dialecttest fake provider (Messages,
// Responses), which enforces the providers' rules, and a chat provider.
func TestRepeatedToolCallIDReplaysOnEveryAPI(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	fakeURL, _ := url.Parse(fake.URL)
	toFake := httputil.NewSingleHostReverseProxy(fakeURL)
	var strict atomic.Bool
	chatUp := numberingUpstream(&strict)
	openai := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/responses" {
			toFake.ServeHTTP(w, r)
			return
		}
		chatUp.ServeHTTP(w, r)
	}))
	gw := serveDialects(t, openai.URL(), fake.URL+"/v1")
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	who := func(conv string) map[string]string {
		return map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ida", "X-Memory-Conversation": conv}
	}
	chat := func(conv, messages string) (int, []byte) {
		return postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model",`+tools+`,"messages":`+messages+`}`, who(conv))
	}
	// twoToolTurns asks twice, the provider calling call_0 each time, and
	// answers each call with the client's own result (newest turn only).
	twoToolTurns := func(conv string) {
		t.Helper()
		for n, q := range []struct{ ask, result string }{{"Weather in Porto?", "sunny, 24C"}, {"And in Lisbon?", "cloudy, 19C"}} {
			if status, b := chat(conv, `[{"role":"user","content":"`+q.ask+`"}]`); status != 200 {
				t.Fatalf("%s: ask %d: %d %s", conv, n, status, b)
			}
			eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ida", conv) >= 4*n+2 })
			if status, b := chat(conv, `[{"role":"tool","tool_call_id":"call_0","content":"`+q.result+`"}]`); status != 200 {
				t.Fatalf("%s: result %d: the replayed prompt was refused (%d): %s", conv, n, status, b)
			}
			eventually(t, "the tool result and answer to be stored", func() bool { return storedCount(t, gw, "ida", conv) >= 4*n+4 })
		}
	}

	// Turns stored before the provider's rules are enforced (an older
	// memgate, a lenient provider): two calls named call_0.
	twoToolTurns("stored")
	strict.Store(true)

	// Responses: distinct call_ids, each output paired with its call.
	status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"input":"And tomorrow?"}`, who("stored"))
	if status != 200 {
		t.Errorf("responses: the replayed tool calls were refused (%d): %s", status, b)
	} else {
		reqs := fake.Requests()
		calls, outputs := responsesCallIDs(t, reqs[len(reqs)-1].Body)
		if len(calls) != 2 || calls[0] == calls[1] || !slices.Equal(calls, outputs) {
			t.Errorf("responses replayed calls %q and outputs %q, want two distinct pairs", calls, outputs)
		}
	}

	// Messages: the fake refuses a tool_use id given twice.
	claude := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-User": "ida", "X-Memory-Conversation": "stored"}
	status, b = postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"And the day after?"}]}`, claude)
	if status != 200 {
		t.Errorf("messages: the replayed tool calls were refused (%d): %s", status, b)
	}

	// Chat: the fake refuses a call id given twice.
	if status, b := chat("stored", `[{"role":"user","content":"Thanks!"}]`); status != 200 {
		t.Errorf("chat: the replayed tool calls were refused (%d): %s", status, b)
	} else {
		calls, answers := chatToolIDs(t, openai.Last(t).Body)
		if len(calls) != 2 || calls[0] == calls[1] || !slices.Equal(calls, answers) {
			t.Errorf("chat replayed calls %q answered by %q, want two distinct pairs", calls, answers)
		}
	}

	// A client answering the newest stored call_0 while an older one is
	// stored: its pair keeps call_0, the older copy is renamed.
	twoToolTurns("live")
	var sent []byte
	for _, r := range openai.Requests() {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(r.Body, &req) == nil && len(req.Messages) > 0 &&
			string(req.Messages[len(req.Messages)-1]) == `{"role":"tool","tool_call_id":"call_0","content":"cloudy, 19C"}` {
			sent = r.Body // the last such: the live conversation's
		}
	}
	calls, answers := chatToolIDs(t, sent)
	if len(calls) != 2 || calls[0] == "call_0" || calls[1] != "call_0" || !slices.Equal(calls, answers) {
		t.Errorf("live: calls %q answered by %q, want the older renamed and the client's pair call_0:\n%s", calls, answers, sent)
	}
}
