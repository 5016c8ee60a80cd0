package tokens

import (
	"bytes"
	"encoding/json"

	"github.com/memgate/memgate/internal/memory"
)

// Chat formatting overheads, in tokens, as OpenAI's cookbook ("How to count
// tokens with tiktoken") documents them for gpt-3.5-turbo, gpt-4 and gpt-4o.
const (
	// PerMessage frames every message: <|start|>{role}<|message|>…<|end|>.
	PerMessage = 3
	// PerName is added when a message carries a name.
	PerName = 1
	// ReplyPriming primes the reply: <|start|>assistant<|message|>.
	ReplyPriming = 3
)

// Estimates for what OpenAI does not publish per message. They err on the
// side of counting more, because budgets built on them must not overflow.
const (
	// PerToolCall is added for each tool call an assistant message carries,
	// on top of the function name and arguments: the recipient marker
	// ("to=functions.NAME"), the content type and the call delimiters.
	PerToolCall = 7
	// ImageLow is what OpenAI bills for an image sent with detail "low".
	ImageLow = 85
	// ImageHigh estimates an image with detail "high" or "auto": 85 base
	// tokens plus 170 per 512-pixel tile, assuming the 2×2 tiles of a typical
	// 1024×1024 image (85 + 170*4 = 765). The real size is not read from the
	// image data.
	ImageHigh = 85 + 170*4
	// OtherPart estimates a content part that is neither text nor image
	// (audio, files), whose size the gateway does not decode.
	OtherPart = 256
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

// Messages returns what a chat completion request with msgs costs in prompt
// tokens for model: the sum of RawMessage over msgs plus ReplyPriming. It
// matches OpenAI's reported prompt_tokens for text messages; tool calls and
// images are estimated as documented on PerToolCall and ImageHigh. Tool
// definitions (the request's "tools") are not included.
func (c *Counter) Messages(model string, msgs []json.RawMessage) int {
	n := ReplyPriming
	for _, m := range msgs {
		n += c.RawMessage(model, m)
	}
	return n
}

// RawMessage returns what one OpenAI chat message object costs inside a
// prompt for model: PerMessage, its role, text content and text parts,
// refusal, name (plus PerName), tool calls (name, arguments, PerToolCall) and
// images (ImageLow or ImageHigh). A message that is not a JSON object is
// counted as text, so a malformed message is never free.
func (c *Counter) RawMessage(model string, raw json.RawMessage) int {
	if len(raw) < memoMinBytes {
		return c.rawMessage(model, raw)
	}
	return c.memo.count(c.memo.key(kindMessage, c.encoder(model).name, "", raw), func() int { return c.rawMessage(model, raw) })
}

// SystemMessage returns what RawMessage returns for the message
// {"role":"system","content":text}, without encoding and parsing it: the
// memory block is counted this way on every request, and it is long.
func (c *Counter) SystemMessage(model, text string) int {
	return PerMessage + c.Text(model, "system") + c.Text(model, text)
}

// rawMessage is RawMessage, counted.
func (c *Counter) rawMessage(model string, raw json.RawMessage) int {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return PerMessage + c.Text(model, string(raw))
	}
	n := PerMessage + c.Text(model, w.Role) + c.content(model, w.Content) + c.Text(model, w.Refusal)
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

// Message returns what a stored message costs inside a prompt for model. It
// counts m.Raw with RawMessage when present, otherwise PerMessage plus the
// role and Content.
func (c *Counter) Message(model string, m memory.Message) int {
	if len(m.Raw) > 0 {
		return c.RawMessage(model, m.Raw)
	}
	return PerMessage + c.Text(model, m.Role) + c.Text(model, m.Content)
}

// content counts a message's content: a string, null, or an array of parts.
func (c *Counter) content(model string, raw json.RawMessage) int {
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
			n += imageTokens(p)
		default:
			n += OtherPart
		}
	}
	return n
}

// imageTokens estimates an image part by its detail level.
func imageTokens(p wirePart) int {
	detail := p.ImageURL.Detail
	if detail == "" {
		detail = p.Detail
	}
	if detail == "low" {
		return ImageLow
	}
	return ImageHigh
}
