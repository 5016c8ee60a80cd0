package upstreamtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// RequireAlternation serves h, except that a request whose messages
// (Chat Completions, Anthropic Messages) break strict turn-taking gets a
// 400 error body, as the Anthropic Messages API and AWS Bedrock's Converse
// API (and OpenAI-compatible gateways in front of it, or chat templates of
// open models) answer:
//
//   - after the leading system and developer messages, the first message
//     is a user's;
//   - user and assistant turns alternate: a tool or function result
//     (chat) is on the user's side, as Anthropic and Bedrock carry it, and
//     results in a row are one turn;
//   - a user message, and an assistant message without tool_calls or
//     function_call, has content other than whitespace, and no text block
//     or part is blank.
//
// A body with no messages array (Responses, whose items take either role
// in any order) is served as it is.
func RequireAlternation(h http.Handler) http.Handler { return refuse(h, alternates) }

// alternates reports why body's messages break strict turn-taking (see
// RequireAlternation), or nil.
func alternates(body []byte) error {
	var req struct {
		Messages []struct {
			Role         string            `json:"role"`
			Content      json.RawMessage   `json:"content"`
			ToolCalls    []json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage   `json:"function_call"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	prev := "" // the side of the previous turn: user or assistant
	prevRole := ""
	for i, m := range req.Messages {
		side := m.Role
		switch m.Role {
		case "system", "developer":
			if prev == "" {
				continue
			}
			return fmt.Errorf("messages.%d: a %s message must come before the conversation", i, m.Role)
		case "tool", "function":
			side = "user"
		case "user", "assistant":
		default:
			return fmt.Errorf("messages.%d.role: unexpected role %q", i, m.Role)
		}
		results := side == "user" && m.Role != "user"
		switch {
		case prev == "" && side != "user":
			return fmt.Errorf("messages: first message must use the \"user\" role")
		case side == prev && !(results && (prevRole == "tool" || prevRole == "function")):
			return fmt.Errorf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", side)
		}
		calls := len(m.ToolCalls) > 0 || len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null"
		if err := nonBlank(m.Content); err != nil && (err != errNoContent || m.Role == "user" || m.Role == "assistant" && !calls) {
			return fmt.Errorf("messages.%d: %w", i, err)
		}
		prev, prevRole = side, m.Role
	}
	return nil
}

// errNoContent is nonBlank's answer for a content with no text at all.
var errNoContent = fmt.Errorf("all messages must have non-empty content")

// nonBlank reports whether content (a string, null, or an array of blocks
// or parts) holds something other than whitespace: errNoContent when it
// does not, another error when one of its text blocks is blank.
func nonBlank(content json.RawMessage) error {
	c := bytes.TrimSpace(content)
	switch {
	case len(c) == 0 || string(c) == "null":
		return errNoContent
	case c[0] == '"':
		var s string
		if json.Unmarshal(c, &s) != nil || strings.TrimSpace(s) == "" {
			return errNoContent
		}
		return nil
	}
	var blocks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(c, &blocks) != nil || len(blocks) == 0 {
		return errNoContent
	}
	for j, b := range blocks {
		if b.Type == "text" && (b.Text == nil || strings.TrimSpace(*b.Text) == "") {
			return fmt.Errorf("content.%d: text content blocks must contain non-whitespace text", j)
		}
	}
	return nil
}
