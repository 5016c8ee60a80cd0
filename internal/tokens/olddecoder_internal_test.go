package tokens

import (
	"bytes"
	"encoding/json"
)

// wireMessage is the part of an OpenAI chat message that costs tokens.
type wireMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name"`
	Refusal      string          `json:"refusal"`
	ToolCallID   string          `json:"tool_call_id"`
	ToolCalls    []wireToolCall  `json:"tool_calls"`
	FunctionCall *wireFunction   `json:"function_call"`
}

type wireToolCall struct {
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL struct {
		Detail string `json:"detail"`
	} `json:"image_url"`
	Detail string `json:"detail"`
}

// oldRawMessage is RawMessage as counted by tokens' own decoder, before
// it counted from memory.DecodeMessage: the differential check's other side.
func oldRawMessage(c *Counter, model string, raw json.RawMessage) int {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return PerMessage + c.Text(model, string(raw))
	}
	n := PerMessage + c.Text(model, w.Role) + oldContent(c, model, w.Content) + c.Text(model, w.Refusal)
	if w.Name != "" {
		n += c.Text(model, w.Name) + PerName
	}
	for _, tc := range w.ToolCalls {
		n += PerToolCall + c.Text(model, tc.Function.Name) + c.Text(model, tc.Function.Arguments)
	}
	if f := w.FunctionCall; f != nil {
		n += PerToolCall + c.Text(model, f.Name) + c.Text(model, f.Arguments)
	}
	return n
}

// content counts a message's content: a string, null, or an array of parts.
func oldContent(c *Counter, model string, raw json.RawMessage) int {
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	if raw[0] == '"' {
		// The message was valid JSON, so a string without escapes is its
		// own text: skip decoding it a second time.
		if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
			return c.Text(model, string(raw[1:len(raw)-1]))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return c.Text(model, string(raw))
		}
		return c.Text(model, s)
	}
	var parts []wirePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return c.Text(model, string(raw))
	}
	n := 0
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			n += c.Text(model, p.Text)
		case "refusal":
			n += c.Text(model, p.Refusal)
		case "image_url", "input_image":
			n += oldImageTokens(p)
		default:
			n += OtherPart
		}
	}
	return n
}

// imageTokens estimates an image part by its detail level.
func oldImageTokens(p wirePart) int {
	detail := p.ImageURL.Detail
	if detail == "" {
		detail = p.Detail
	}
	if detail == "low" {
		return ImageLow
	}
	return ImageHigh
}
