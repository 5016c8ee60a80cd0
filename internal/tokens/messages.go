package tokens

import (
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
// counted as text, so a malformed message is never free. The message is
// read by memory.Decode.
func (c *Counter) RawMessage(model string, raw json.RawMessage) int {
	if len(raw) < memoMinBytes {
		p := memory.Decode(raw)
		return c.decoded(model, raw, &p)
	}
	return c.memo.count(c.scope, kindMessage, c.encoder(model), "", raw, func() int {
		p := memory.Decode(raw)
		return c.decoded(model, raw, &p)
	})
}

// SystemMessage returns what RawMessage returns for the message
// {"role":"system","content":text}, without encoding and parsing it: the
// memory block is counted this way on every request, and it is long.
func (c *Counter) SystemMessage(model, text string) int {
	return PerMessage + c.Text(model, "system") + c.Text(model, text)
}

// Message returns what a message costs inside a prompt for model: what
// RawMessage returns for m.Raw, counted from what memory.ParseMessage read
// of it (m.Decoded(): a request's messages are not decoded again), or, for
// a message without Raw, PerMessage plus the role and Content.
func (c *Counter) Message(model string, m memory.Message) int {
	if len(m.Raw) == 0 {
		return PerMessage + c.Text(model, m.Role) + c.Text(model, m.Content)
	}
	if len(m.Raw) < memoMinBytes {
		p := m.Decoded()
		return c.decoded(model, m.Raw, &p)
	}
	return c.memo.count(c.scope, kindMessage, c.encoder(model), "", m.Raw, func() int {
		p := m.Decoded()
		return c.decoded(model, m.Raw, &p)
	})
}

// decoded counts the message raw, which memory read as p.
func (c *Counter) decoded(model string, raw json.RawMessage, p *memory.Parsed) int {
	if p.Malformed {
		return PerMessage + c.Text(model, string(raw))
	}
	n := PerMessage + c.Text(model, p.Role) + c.Text(model, p.Refusal)
	if p.Parts != nil {
		n += c.parts(model, p.Parts)
	} else {
		n += c.Text(model, p.Text)
	}
	if p.Name != "" {
		n += c.Text(model, p.Name) + PerName
	}
	for _, f := range p.Calls {
		n += PerToolCall + c.Text(model, f.Name) + c.Text(model, f.Arguments)
	}
	return n
}

// parts counts a content of parts.
func (c *Counter) parts(model string, parts []memory.Part) int {
	n := 0
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			n += c.Text(model, p.Text)
		case "refusal":
			n += c.Text(model, p.Refusal)
		case "image_url", "input_image":
			n += imageTokens(p.Detail)
		default:
			n += OtherPart
		}
	}
	return n
}

// imageTokens estimates an image part by its detail level.
func imageTokens(detail string) int {
	if detail == "low" {
		return ImageLow
	}
	return ImageHigh
}
