package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

// Message is a chat message as the adapters write and read it. Content is a
// string, null, or an array of Parts; Reasoning is the reasoning_content
// field (the thinking text some chat APIs return beside the answer);
// ThinkingBlocks is the thinking_blocks field: a JSON array of a reply's
// signed reasoning blocks as the provider gave them (Anthropic's thinking,
// with its signature, and redacted_thinking), which Anthropic requires
// back, unchanged, with the call of a tool loop it continues;
// ThinkingDigest is their digest as received (memory.ReasoningDigest), ""
// when capture could not take it. The memory core never replays either to
// another API (memory.Request.ReplaysThinking).
type Message struct {
	Role           string          `json:"role"`
	Content        json.RawMessage `json:"content"`
	Refusal        string          `json:"refusal,omitempty"`
	ToolCalls      []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID     string          `json:"tool_call_id,omitempty"`
	Reasoning      string          `json:"reasoning_content,omitempty"`
	ThinkingBlocks json.RawMessage `json:"thinking_blocks,omitempty"`
	ThinkingDigest string          `json:"thinking_blocks_sha256,omitempty"`
}

// ToolCall is an assistant's call of a function.
type ToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function names the called function and its arguments (a JSON text).
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Part is one content part: text, image_url or file.
type Part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
	File     *File     `json:"file,omitempty"`
}

// ImageURL is an image_url part's image: an https or data: URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// File is a file part's document: inline data (a data: URL) or a file id.
type File struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// Text returns the JSON string s.
func Text(s string) json.RawMessage {
	b, _ := body.Marshal(s) // a string always encodes
	return b
}

// Content returns the content of a user-side message: one string when every
// part is text (joined with "\n", as memory.ParseMessage joins them), else
// the parts. It returns nil when there are no parts.
func Content(parts []Part) json.RawMessage {
	if len(parts) == 0 {
		return nil
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			b, _ := body.Marshal(parts) // plain structs always encode
			return b
		}
		texts = append(texts, p.Text)
	}
	return Text(strings.Join(texts, "\n"))
}

// Assistant returns the assistant message with text, tool calls and
// reasoning. Its content is the text; null when there is none beside tool
// calls, "" when there is nothing at all — what memgate's chat capture
// stores for the same reply.
func Assistant(text string, calls []ToolCall, reasoning, refusal string) Message {
	m := Message{Role: "assistant", ToolCalls: calls, Reasoning: reasoning, Refusal: refusal}
	switch {
	case text != "":
		m.Content = Text(text)
	case len(calls) > 0:
		m.Content = json.RawMessage(`null`)
	default:
		m.Content = json.RawMessage(`""`)
	}
	return m
}

// Encode returns m as a memory.Message whose Raw is m's JSON.
func Encode(m Message) (memory.Message, error) {
	if m.Content == nil {
		m.Content = json.RawMessage(`null`)
	}
	raw, err := body.Marshal(m)
	if err != nil {
		return memory.Message{}, fmt.Errorf("%w: encode %s message: %v", memory.ErrInvalid, m.Role, err)
	}
	msg, err := memory.ParseMessage(raw)
	if err != nil {
		return memory.Message{}, fmt.Errorf("encode %s message: %w", m.Role, err)
	}
	return msg, nil
}

// Decode reads a stored or assembled chat message. Content parts that are
// not text, image_url or file are dropped.
func Decode(raw json.RawMessage) (Message, []Part, error) {
	var m Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return Message{}, nil, fmt.Errorf("%w: chat message: %v", memory.ErrInvalid, err)
	}
	c := m.Content
	if len(c) == 0 || string(c) == "null" {
		return m, nil, nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return Message{}, nil, fmt.Errorf("%w: chat message content: %v", memory.ErrInvalid, err)
		}
		if s == "" {
			return m, nil, nil
		}
		return m, []Part{{Type: "text", Text: s}}, nil
	}
	var parts []Part
	if err := json.Unmarshal(c, &parts); err != nil {
		return Message{}, nil, fmt.Errorf("%w: chat message content: %v", memory.ErrInvalid, err)
	}
	out := parts[:0]
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			out = append(out, Part{Type: "text", Text: p.Text})
		case "image_url":
			if p.ImageURL != nil {
				out = append(out, p)
			}
		case "file":
			if p.File != nil {
				out = append(out, p)
			}
		}
	}
	return m, out, nil
}

// TextOf joins the text parts with "\n".
func TextOf(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// Usage adds up a provider's token usage.
func Usage(prompt, completion int) *memory.Usage {
	return &memory.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}
