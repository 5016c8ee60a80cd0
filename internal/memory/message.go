package memory

import (
	"encoding/json"
	"fmt"
	"strings"
)

// wireMessage is the part of an OpenAI chat message memgate reads.
type wireMessage struct {
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

// ParseMessage reads one OpenAI chat message object. The returned Message
// keeps raw verbatim in Raw and carries the role and a text projection of the
// content: text parts joined, images as "[image]", tool calls as
// "[tool_call name(arguments)]". It fails with ErrInvalid when raw is not a
// JSON object with a role.
func ParseMessage(raw json.RawMessage) (Message, error) {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return Message{}, fmt.Errorf("%w: message is not a JSON object: %v", ErrInvalid, err)
	}
	if w.Role == "" {
		return Message{}, fmt.Errorf("%w: message has no role", ErrInvalid)
	}
	text, err := contentText(w.Content)
	if err != nil {
		return Message{}, err
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
	return Message{Role: w.Role, Content: b.String(), Raw: raw}, nil
}

// contentText flattens a message's content: a string, null, or an array of
// content parts.
func contentText(c json.RawMessage) (string, error) {
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", fmt.Errorf("%w: content: %v", ErrInvalid, err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", fmt.Errorf("%w: content must be a string or an array of parts", ErrInvalid)
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

// IsSystem reports whether a role belongs to the application's instructions
// (system or developer), which memgate never stores as history and never drops.
func IsSystem(role string) bool { return role == "system" || role == "developer" }

// Fingerprint identifies a message's meaning for history alignment: its role
// and text. Two messages with equal fingerprints are the same turn.
func (m Message) Fingerprint() string { return m.Role + "\x00" + m.Content }

// Key returns the idempotency key of the i-th message stored for exchange id.
func Key(exchangeID string, i int) string { return fmt.Sprintf("%s:%d", exchangeID, i) }

// Raws returns each message's Raw, in order: the messages as a prompt's
// JSON values.
func Raws(msgs []Message) []json.RawMessage {
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m.Raw
	}
	return out
}
