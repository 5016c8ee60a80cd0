package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// block is an Anthropic content block, as far as memgate reads it.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	Source    *source         `json:"source"`
	Title     string          `json:"title"`
}

// source is an image or document block's source.
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// toChat converts one Anthropic message to chat messages.
//
// A user message's tool_result blocks become tool messages (in order, first,
// as Anthropic puts them first); its text, image and document blocks become
// one user message after them. An assistant message becomes one assistant
// message (see assistantMessage). Blocks chat cannot hold (server tools,
// redacted thinking, search results) are left out of memory; the client's
// own blocks still go upstream unchanged. Lossless is whether the message
// was read without loss (memory.Lossless; assistantMessage).
func toChat(role string, blocks []block, text *string, lossless bool) ([]chat.Message, error) {
	if text != nil {
		if role == "assistant" {
			return []chat.Message{chat.Assistant(*text, nil, "", "")}, nil
		}
		return []chat.Message{{Role: "user", Content: chat.Text(*text)}}, nil
	}
	if role == "assistant" {
		return []chat.Message{assistantMessage(blocks, lossless)}, nil
	}
	var (
		out   []chat.Message
		parts []chat.Part
	)
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			out = append(out, chat.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: chat.Text(toolResultText(b.Content))})
		default:
			if p, ok := chatPart(b); ok {
				parts = append(parts, p)
			}
		}
	}
	if c := chat.Content(parts); c != nil {
		out = append(out, chat.Message{Role: "user", Content: c})
	}
	if len(out) == 0 {
		// Nothing chat can hold: keep the turn as an empty user message so
		// the conversation's shape survives.
		out = append(out, chat.Message{Role: "user", Content: chat.Text("")})
	}
	return out, nil
}

// assistantMessage converts an assistant's blocks: text blocks concatenated
// (Claude splits one answer into several text blocks around citations),
// tool_use blocks as tool calls with the input as compact JSON, thinking
// blocks joined into reasoning_content, and the signed thinking and
// redacted_thinking blocks, in order, as thinking_blocks (signedThinking),
// with their digest as received when lossless (the blocks were read
// without loss, memory.Lossless). Request history and captured replies go
// through it alike, so a reply the client sends back as history has the
// fingerprint capture stored it under.
func assistantMessage(blocks []block, lossless bool) chat.Message {
	var (
		text     strings.Builder
		thinking []string
		calls    []chat.ToolCall
	)
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			thinking = append(thinking, b.Thinking)
		case "tool_use":
			calls = append(calls, chat.ToolCall{ID: b.ID, Type: "function", Function: chat.Function{Name: b.Name, Arguments: compactJSON(b.Input)}})
		}
	}
	m := chat.Assistant(text.String(), calls, strings.Join(thinking, "\n"), "")
	m.ThinkingBlocks = signedThinking(blocks)
	if lossless && m.ThinkingBlocks != nil {
		m.ThinkingDigest = memory.ReasoningDigest(m.ThinkingBlocks)
	}
	return m
}

// signedThinking returns the thinking blocks that carry the provider's
// signature and the redacted_thinking blocks of an assistant's blocks, in
// order, as a JSON array of the blocks Anthropic takes back (nil when
// there are none): the thinking text and signature, or the data, as the
// provider gave them. A thinking block without a signature (a stream cut
// short) cannot be sent back and is left out.
func signedThinking(blocks []block) json.RawMessage {
	var out []outBlock
	for _, b := range blocks {
		switch {
		case b.Type == "thinking" && b.Signature != "":
			out = append(out, outBlock{Type: b.Type, Thinking: &b.Thinking, Signature: b.Signature})
		case b.Type == "redacted_thinking" && b.Data != "":
			out = append(out, outBlock{Type: b.Type, Data: b.Data})
		}
	}
	if len(out) == 0 {
		return nil
	}
	raw, err := body.Marshal(out)
	if err != nil { // plain strings always encode
		return nil
	}
	return raw
}

// compactJSON returns a tool input as compact JSON text ("{}" when absent).
func compactJSON(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || string(in) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, in); err != nil {
		return string(in)
	}
	return b.String()
}

// toolResultText flattens a tool_result's content: a string, or blocks whose
// text is joined with "\n" and whose images show as "[image]".
func toolResultText(c json.RawMessage) string {
	if len(c) == 0 || string(c) == "null" {
		return ""
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(c, &s) == nil {
			return s
		}
		return ""
	}
	var blocks []block
	if json.Unmarshal(c, &blocks) != nil {
		return ""
	}
	var out []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, b.Text)
		case "image":
			out = append(out, "[image]")
		}
	}
	return strings.Join(out, "\n")
}

// chatPart converts a user's text, image or document block to a chat part.
func chatPart(b block) (chat.Part, bool) {
	switch b.Type {
	case "text":
		return chat.Part{Type: "text", Text: b.Text}, true
	case "image":
		if s := b.Source; s != nil {
			switch s.Type {
			case "base64":
				return chat.Part{Type: "image_url", ImageURL: &chat.ImageURL{URL: "data:" + s.MediaType + ";base64," + s.Data}}, true
			case "url":
				return chat.Part{Type: "image_url", ImageURL: &chat.ImageURL{URL: s.URL}}, true
			}
		}
	case "document":
		if s := b.Source; s != nil {
			switch s.Type {
			case "base64":
				return chat.Part{Type: "file", File: &chat.File{FileData: "data:" + s.MediaType + ";base64," + s.Data, Filename: b.Title}}, true
			case "text":
				return chat.Part{Type: "text", Text: s.Data}, true
			}
		}
	}
	return chat.Part{}, false
}

// outBlock is a content block memgate writes for a stored turn.
type outBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	Source    *source         `json:"source,omitempty"`
	// Thinking (possibly empty), Signature and Data are a signed thinking
	// or redacted_thinking block's, sent back as the provider gave them.
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

// fromChat converts a stored chat message to the role and blocks of an
// Anthropic message. System messages and messages with nothing Anthropic
// can hold yield ok == false. A text that is only whitespace is no block
// (the API refuses a blank text block). An assistant's reasoning goes back
// only as the signed blocks stored with it (thinking_blocks, which the
// memory core leaves in a replayed turn when the request has thinking
// on), first, as Anthropic wants them: a thinking block needs the
// provider's signature.
func fromChat(raw json.RawMessage) (role string, blocks []outBlock, ok bool) {
	m, parts, err := chat.Decode(raw)
	if err != nil {
		return "", nil, false
	}
	switch m.Role {
	case "user":
		for _, p := range parts {
			if b, ok := blockOf(p); ok {
				blocks = append(blocks, b)
			}
		}
		return "user", blocks, len(blocks) > 0
	case "assistant":
		blocks = thinkingBlocks(m.ThinkingBlocks, m.ThinkingDigest)
		thought := len(blocks) // a turn of reasoning alone says nothing
		if t := chat.TextOf(parts); strings.TrimSpace(t) != "" {
			blocks = append(blocks, outBlock{Type: "text", Text: t})
		}
		if strings.TrimSpace(m.Refusal) != "" {
			blocks = append(blocks, outBlock{Type: "text", Text: m.Refusal})
		}
		for _, tc := range m.ToolCalls {
			in := json.RawMessage(tc.Function.Arguments)
			var obj map[string]json.RawMessage
			if json.Unmarshal(in, &obj) != nil || obj == nil {
				in = json.RawMessage(`{}`)
			}
			blocks = append(blocks, outBlock{Type: "tool_use", ID: toolUseID(tc.ID), Name: tc.Function.Name, Input: in})
		}
		if len(blocks) == thought {
			return "", nil, false
		}
		return "assistant", blocks, true
	case "tool":
		return "user", []outBlock{{Type: "tool_result", ToolUseID: toolUseID(m.ToolCallID), Content: chat.TextOf(parts)}}, m.ToolCallID != ""
	}
	return "", nil, false
}

// thinkingBlocks reads a stored reply's signed reasoning blocks
// (chat.Message.ThinkingBlocks) and their digest as received: none when
// there are none or they cannot be read, or when a block's text,
// signature or data was changed since the provider signed it
// (memory.ReasoningIntact: the redactor, with its own patterns or an
// operator's, replaced a secret in it, or storing sanitized it — the API
// would refuse the signature). Each block goes back with its own members
// only.
func thinkingBlocks(raw json.RawMessage, digest string) []outBlock {
	if len(raw) == 0 || !memory.ReasoningIntact(raw, digest) {
		return nil
	}
	var bs []outBlock
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	out := make([]outBlock, 0, len(bs))
	for _, b := range bs {
		switch {
		case b.Type == "thinking" && b.Thinking != nil && b.Signature != "":
			out = append(out, outBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case b.Type == "redacted_thinking" && b.Data != "":
			out = append(out, outBlock{Type: b.Type, Data: b.Data})
		default:
			return nil
		}
	}
	return out
}

// toolUseID returns a stored tool call's id as a tool_use id the Messages
// API accepts (letters, digits, '_' and '-'): the id itself when it is
// one, else "toolu_" and a hash of it — the same for the call and the
// result that answers it, and on every request. A call stored from
// another API may have any id ("functions.get_weather:0", as some
// OpenAI-compatible servers name calls), which the API refuses, failing
// the request. An empty id stays empty: such a call has no result to
// pair (the memory core gives stored calls without an id one).
func toolUseID(id string) string {
	valid := id != ""
	for i := 0; i < len(id) && valid; i++ {
		c := id[i]
		valid = c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	if valid || id == "" {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "toolu_" + hex.EncodeToString(sum[:12])
}

// blockOf converts a chat part to an Anthropic block.
func blockOf(p chat.Part) (outBlock, bool) {
	switch p.Type {
	case "text":
		return outBlock{Type: "text", Text: p.Text}, strings.TrimSpace(p.Text) != ""
	case "image_url":
		if media, data, ok := dataURL(p.ImageURL.URL); ok {
			return outBlock{Type: "image", Source: &source{Type: "base64", MediaType: media, Data: data}}, true
		}
		if strings.HasPrefix(p.ImageURL.URL, "https://") || strings.HasPrefix(p.ImageURL.URL, "http://") {
			return outBlock{Type: "image", Source: &source{Type: "url", URL: p.ImageURL.URL}}, true
		}
	case "file":
		if media, data, ok := dataURL(p.File.FileData); ok && media == "application/pdf" {
			return outBlock{Type: "document", Source: &source{Type: "base64", MediaType: media, Data: data}}, true
		}
	}
	return outBlock{}, false
}

// dataURL splits a base64 data: URL into its media type and data.
func dataURL(u string) (media, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	media, ok = strings.CutSuffix(head, ";base64")
	return media, data, ok && media != ""
}
