package upstreamtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Created is the "created" timestamp of every generated completion.
const Created = 1700000000

// ToolCall is a tool call the fake model makes.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Usage is the token usage the fake upstream reports.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens, when set, is reported as
	// prompt_tokens_details.cached_tokens.
	CachedTokens int
}

// Reply scripts one assistant answer. The same Reply is served as a
// chat.completion JSON body or as an SSE chunk stream, depending on the
// request's "stream" field.
type Reply struct {
	// ID is the completion id (default "chatcmpl-test").
	ID string
	// Content is the assistant's text; empty with ToolCalls means null content.
	Content string
	// Chunks splits Content into streamed deltas; nil splits it after every
	// space.
	Chunks []string
	// ToolCalls are the tool calls the assistant makes; streamed, each call's
	// arguments are split in two deltas.
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" with ToolCalls, else "stop".
	FinishReason string
	// Usage defaults to {9, 12}.
	Usage *Usage
}

func (r Reply) id() string {
	if r.ID == "" {
		return "chatcmpl-test"
	}
	return r.ID
}

func (r Reply) finish() string {
	switch {
	case r.FinishReason != "":
		return r.FinishReason
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func (r Reply) usage() Usage {
	if r.Usage == nil {
		return Usage{PromptTokens: 9, CompletionTokens: 12}
	}
	return *r.Usage
}

func (r Reply) chunks() []string {
	if r.Chunks != nil {
		return r.Chunks
	}
	if r.Content == "" {
		return nil
	}
	return strings.SplitAfter(r.Content, " ")
}

// q returns s as a JSON string literal.
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func usageJSON(u Usage) string {
	if u.CachedTokens > 0 {
		return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
			u.PromptTokens, u.CompletionTokens, u.PromptTokens+u.CompletionTokens, u.CachedTokens)
	}
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`,
		u.PromptTokens, u.CompletionTokens, u.PromptTokens+u.CompletionTokens)
}

// Completion returns the chat.completion JSON body for r answered by model.
func Completion(model string, r Reply) []byte {
	content := "null"
	if r.Content != "" || len(r.ToolCalls) == 0 {
		content = q(r.Content)
	}
	var calls string
	if len(r.ToolCalls) > 0 {
		parts := make([]string, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			parts[i] = fmt.Sprintf(`{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, q(c.ID), q(c.Name), q(c.Arguments))
		}
		calls = `,"tool_calls":[` + strings.Join(parts, ",") + `]`
	}
	return fmt.Appendf(nil, `{"id":%s,"object":"chat.completion","created":%d,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null%s},"logprobs":null,"finish_reason":%s}],"usage":%s,"system_fingerprint":"fp_test"}`,
		q(r.id()), Created, q(model), content, calls, q(r.finish()), usageJSON(r.usage()))
}

// StreamEvents returns the data payloads of the SSE stream answering r: a role
// chunk, content deltas, tool-call deltas (id, type and name first, then the
// arguments in two pieces), a finish_reason chunk and, when includeUsage, a
// final usage chunk with empty choices. The terminating [DONE] is not included.
func StreamEvents(model string, r Reply, includeUsage bool) []string {
	head := fmt.Sprintf(`{"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"system_fingerprint":"fp_test","choices":`, q(r.id()), Created, q(model))
	choice := func(delta, finish string) string {
		return head + `[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`
	}
	events := []string{choice(`{"role":"assistant","content":"","refusal":null}`, "null")}
	for _, c := range r.chunks() {
		events = append(events, choice(`{"content":`+q(c)+`}`, "null"))
	}
	for i, c := range r.ToolCalls {
		events = append(events, choice(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, q(c.ID), q(c.Name)), "null"))
		half := len(c.Arguments) / 2
		for _, piece := range []string{c.Arguments[:half], c.Arguments[half:]} {
			events = append(events, choice(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, q(piece)), "null"))
		}
	}
	events = append(events, choice(`{}`, q(r.finish())))
	if includeUsage {
		events = append(events, head+`[],"usage":`+usageJSON(r.usage())+`}`)
	}
	return events
}

// chatRequest is the part of a chat completion request the fake reads.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []chatMessage `json:"messages"`
}

// chatMessage is the part of a request message the fake checks.
type chatMessage struct {
	Role      string `json:"role"`
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// ValidateChat checks a chat completion request body's messages by the
// tool-call rules of checkToolCalls.
func ValidateChat(body []byte) error {
	var cr chatRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		return fmt.Errorf("We could not parse the JSON body of your request. (%w)", err)
	}
	return checkToolCalls(cr.Messages)
}

// checkToolCalls checks the tool-call rules of a chat request's messages:
// a tool message answers a call of the assistant message whose
// results it is among (the tool messages right after it), and every call
// of an assistant message is answered there — OpenAI refuses either
// break with a 400 and these messages. Stricter than OpenAI, a call id is
// given once in the request: with two calls of one id, which one a result
// answers is ambiguous, and a server that pairs results with calls by id
// pairs it with the wrong one; memgate must never make such a prompt.
func checkToolCalls(msgs []chatMessage) error {
	used := map[string]bool{}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == "tool" {
			return fmt.Errorf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages.[%d])", i)
		}
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		open := map[string]bool{}
		for _, c := range m.ToolCalls {
			if used[c.ID] {
				return fmt.Errorf("messages.[%d].tool_calls: tool call id %q was already given in this request", i, c.ID)
			}
			used[c.ID], open[c.ID] = true, true
		}
		for i+1 < len(msgs) && msgs[i+1].Role == "tool" {
			i++
			if _, ok := open[msgs[i].ToolCallID]; !ok {
				return fmt.Errorf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages.[%d])", i)
			}
			delete(open, msgs[i].ToolCallID)
		}
		for _, c := range m.ToolCalls {
			if open[c.ID] {
				return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", c.ID)
			}
		}
	}
	return nil
}

// Chat answers chat completion requests with r: as JSON, or as an SSE stream
// ending in [DONE] when the request has "stream": true (with the usage chunk
// when stream_options.include_usage is set). A body that is not JSON, or
// whose messages break the tool-call rules (checkToolCalls), gets a 400 error
// body.
func Chat(r Reply) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var cr chatRequest
		if err := json.NewDecoder(req.Body).Decode(&cr); err != nil {
			Error(http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.").ServeHTTP(w, req)
			return
		}
		if err := checkToolCalls(cr.Messages); err != nil {
			Error(http.StatusBadRequest, "invalid_request_error", "", err.Error()).ServeHTTP(w, req)
			return
		}
		if cr.Stream {
			SSE(StreamEvents(cr.Model, r, cr.StreamOptions.IncludeUsage)...).ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(Completion(cr.Model, r))
	})
}
