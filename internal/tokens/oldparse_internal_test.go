package tokens

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// oldWireMessage is the part of an OpenAI chat message memgate reads.
type oldWireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls,omitempty"`
}

// oldParseMessage is memory.ParseMessage before it kept what the token
// count reads: ParseMessage must still answer as it did.
// It reads one OpenAI chat message object. The returned Message
// keeps raw verbatim in Raw and carries the role and a text projection of the
// content: text parts joined, images as "[image]", tool calls as
// "[tool_call name(arguments)]". It fails with memory.ErrInvalid when raw is not a
// JSON object with a role.
func oldParseMessage(raw json.RawMessage) (memory.Message, error) {
	var w oldWireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return memory.Message{}, fmt.Errorf("%w: message is not a JSON object: %v", memory.ErrInvalid, err)
	}
	if w.Role == "" {
		return memory.Message{}, fmt.Errorf("%w: message has no role", memory.ErrInvalid)
	}
	text, err := oldContentText(w.Content)
	if err != nil {
		return memory.Message{}, err
	}
	var b strings.Builder
	b.WriteString(text)
	if w.Refusal != nil && *w.Refusal != "" {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(*w.Refusal)
	}
	for _, tc := range w.ToolCalls {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[tool_call %s(%s)]", tc.Function.Name, tc.Function.Arguments)
	}
	return memory.Message{Role: w.Role, Content: b.String(), Raw: raw}, nil
}

// contentText flattens a message's content: a string, null, or an array of
// content parts.
func oldContentText(c json.RawMessage) (string, error) {
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", fmt.Errorf("%w: content: %v", memory.ErrInvalid, err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", fmt.Errorf("%w: content must be a string or an array of parts", memory.ErrInvalid)
	}
	var b strings.Builder
	for _, p := range parts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		case "image_url", "input_image":
			b.WriteString("[image]")
		case "input_audio":
			b.WriteString("[audio]")
		default:
			b.WriteString("[" + p.Type + "]")
		}
	}
	return b.String(), nil
}
