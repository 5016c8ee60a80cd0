package dialecttest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// anthropicBlock is a content block of the fake's reading.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	blocks  []anthropicBlock
}

// anthropicError writes Anthropic's error shape.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// toolIDPattern is what the Messages API accepts as a tool_use id (and a
// tool_result's tool_use_id).
var toolIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// validateMessages enforces the Messages API rules memgate must respect:
// messages alternate starting with the user's, none is empty (but a final
// assistant one) and no text block blank, every tool_use has an id of
// the API's pattern, unique in the request, and is answered by tool_result
// blocks (first in the content) in the next message, and every tool_result
// answers a tool_use of the message before.
//
// With extended thinking on (thinking), the final assistant message, when
// it holds tool_use blocks, must start with a thinking or
// redacted_thinking block, and a thinking block's signature, when the fake
// gave it, must be the one it gave that text (signature): the API refuses a tool loop's
// call sent back without the reasoning that made it, or with it changed.
func validateMessages(msgs []anthropicMessage, thinking bool) error {
	if len(msgs) == 0 {
		return fmt.Errorf("messages: at least one message is required")
	}
	var prevUses []string
	used := map[string]bool{} // every tool_use id so far
	for i := range msgs {
		m := &msgs[i]
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && m.Role != "user" {
			return fmt.Errorf("messages: first message must use the \"user\" role")
		}
		if i > 0 && m.Role == msgs[i-1].Role {
			return fmt.Errorf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		if len(m.Content) > 0 && m.Content[0] == '[' {
			if err := json.Unmarshal(m.Content, &m.blocks); err != nil {
				return fmt.Errorf("messages.%d.content: %v", i, err)
			}
			if len(m.blocks) == 0 {
				return fmt.Errorf("messages.%d: all messages must have non-empty content", i)
			}
		} else if s := ""; json.Unmarshal(m.Content, &s) != nil || s == "" && i < len(msgs)-1 {
			return fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		var uses, results []string
		other := false
		for j, b := range m.blocks {
			switch b.Type {
			case "tool_use":
				if !toolIDPattern.MatchString(b.ID) {
					return fmt.Errorf("messages.%d.content.%d.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", i, j)
				}
				if used[b.ID] {
					return fmt.Errorf("messages.%d.content.%d: `tool_use` ids must be unique", i, j)
				}
				used[b.ID] = true
				uses = append(uses, b.ID)
			case "tool_result":
				if !toolIDPattern.MatchString(b.ToolUseID) {
					return fmt.Errorf("messages.%d.content.%d.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'", i, j)
				}
				if other {
					return fmt.Errorf("messages.%d.content.%d: tool_result blocks must come first", i, j)
				}
				if !slices.Contains(prevUses, b.ToolUseID) {
					return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				results = append(results, b.ToolUseID)
			case "text":
				if strings.TrimSpace(b.Text) == "" {
					return fmt.Errorf("messages.%d.content.%d.text: text content blocks must contain non-whitespace text", i, j)
				}
				other = true
			default:
				other = true
			}
		}
		for _, id := range prevUses {
			if !slices.Contains(results, id) {
				return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i-1, id)
			}
		}
		prevUses = uses
	}
	return validateThinking(msgs, thinking)
}

// validateThinking enforces the thinking rules of validateMessages on
// msgs, whose blocks are read.
func validateThinking(msgs []anthropicMessage, thinking bool) error {
	for i, m := range msgs {
		for j, b := range m.blocks {
			if b.Type == "thinking" && strings.HasPrefix(b.Signature, signaturePrefix) && b.Signature != signature(b.Thinking) {
				return fmt.Errorf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	if !thinking {
		return nil
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != "assistant" {
			continue
		}
		if !slices.ContainsFunc(m.blocks, func(b anthropicBlock) bool { return b.Type == "tool_use" }) {
			return nil
		}
		if t := m.blocks[0].Type; t != "thinking" && t != "redacted_thinking" {
			return fmt.Errorf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", i, t)
		}
		return nil
	}
	return nil
}

// signaturePrefix starts every signature the fake gives; one that does
// not (a client's own, from elsewhere) is not checked.
const signaturePrefix = "fakesig"

// signature is the signature the fake gives a thinking block's text.
func signature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return signaturePrefix + base64.StdEncoding.EncodeToString(sum[:])
}

// messages answers POST /v1/messages.
func (u *Upstream) messages(w http.ResponseWriter, r *http.Request, body []byte) {
	// Older SDKs send the key as x-api-key, newer ones as a bearer token.
	if r.Header.Get("x-api-key") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var req struct {
		Model     string             `json:"model"`
		MaxTokens int                `json:"max_tokens"`
		Stream    bool               `json:"stream"`
		Tools     []json.RawMessage  `json:"tools"`
		Messages  []anthropicMessage `json:"messages"`
		Thinking  *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if req.Model == "" || req.MaxTokens <= 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model and max_tokens are required")
		return
	}
	thinking := req.Thinking != nil && req.Thinking.Type == "enabled"
	if err := validateMessages(req.Messages, thinking); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	last := req.Messages[len(req.Messages)-1]
	var result, userText string
	if len(last.blocks) == 0 {
		json.Unmarshal(last.Content, &userText)
	}
	for _, b := range last.blocks {
		switch b.Type {
		case "tool_result":
			var s string
			if json.Unmarshal(b.Content, &s) != nil {
				var parts []anthropicBlock
				json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					s += p.Text
				}
			}
			result = s
		case "text":
			userText = b.Text
		}
	}
	n := u.next()
	var blocks []anthropicBlock
	stop := "end_turn"
	switch {
	case len(req.Tools) > 0 && result == "":
		blocks = []anthropicBlock{
			{Type: "text", Text: "Let me check the weather."},
			{Type: "tool_use", ID: fmt.Sprintf("toolu_fake%04d", n), Name: "get_weather", Input: json.RawMessage(`{"city":"Porto"}`)},
		}
		for k := 1; k < u.toolUseCount(); k++ {
			blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_fake%04d_%d", n, k), Name: "get_weather",
				Input: json.RawMessage(fmt.Sprintf(`{"city":"City %d"}`, k))})
		}
		stop = "tool_use"
	case result != "":
		blocks = []anthropicBlock{{Type: "text", Text: "The tool says: " + result + "."}}
	default:
		blocks = []anthropicBlock{{Type: "text", Text: "You said: " + userText}}
	}
	if thinking {
		t := fmt.Sprintf("Thinking %04d: the user said %q.", n, userText)
		blocks = append([]anthropicBlock{{Type: "thinking", Thinking: t, Signature: signature(t)}}, blocks...)
	}
	inTokens, outTokens := len(body)/4, 12*len(blocks)
	msgID := fmt.Sprintf("msg_fake%04d", n)
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": blocks,
			"stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": inTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": outTokens},
		})
		return
	}
	s := newSSE(w)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1},
	}})
	for i, b := range blocks {
		switch b.Type {
		case "thinking":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, p := range pieces(b.Thinking, 4) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": p}})
			}
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b.Signature}})
		case "text":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			if i == 0 {
				s.event("ping", map[string]any{"type": "ping"})
			}
			for _, p := range pieces(b.Text, 6) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
		case "tool_use":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			in := string(b.Input)
			for _, p := range []string{"", in[:len(in)/2], in[len(in)/2:]} {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
			}
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": outTokens}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
