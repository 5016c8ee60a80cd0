package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// wireMessage is the part of an OpenAI chat message a valid message must
// hold well-formed: ParseMessage rejects a message this does not decode.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
}

// ToolCall is one tool call of an assistant message, as the chat wire
// holds it.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// wireCounted is what memgate reads of a chat message: what a prompt shows
// of it and what its tokens cost. A message it does not decode is counted
// as plain text (Parsed.Malformed); one whose tool calls' id or type are
// not strings decodes here but is not a valid message (wireMessage).
type wireCounted struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	Refusal    *string         `json:"refusal"`
	ToolCalls  []struct {
		ID       stringOrNull `json:"id"`
		Type     stringOrNull `json:"type"`
		Function FunctionCall `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *FunctionCall `json:"function_call"`
}

// stringOrNull reads any JSON value, noting whether it was something other
// than a string or null (a tool call's id or type that make a message
// invalid, though it is counted all the same).
type stringOrNull struct{ other bool }

// UnmarshalJSON notes whether b is neither a string nor null.
func (v *stringOrNull) UnmarshalJSON(b []byte) error {
	v.other = len(b) > 0 && b[0] != '"' && string(b) != "null"
	return nil
}

// wirePart is one content part, as much of it as a prompt and the token
// count read. A content whose parts it does not decode is counted as plain
// text.
type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL struct {
		Detail string `json:"detail"`
	} `json:"image_url"`
	Detail string `json:"detail"`
}

// wirePartText is the part of a content part a valid message must hold
// well-formed.
type wirePartText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Parsed is what ParseMessage reads of a message's JSON beyond its text
// projection: what counting its tokens (internal/tokens) and finding its
// tool calls need, so that no later step decodes Raw again. Message.Decoded
// returns it.
type Parsed struct {
	// Malformed is true when the JSON is not an object of a chat message's
	// fields: its tokens are counted as plain text, and the fields below
	// but Role (when a valid message's) are empty.
	Malformed bool
	// Role is the message's role.
	Role string
	// Name is the message's name ("" when none).
	Name string
	// Refusal is the message's refusal ("" when none).
	Refusal string
	// Text is the content read as text: a string content, or the
	// content's JSON when it is neither a string, null nor an array of
	// well-formed parts. It is "" when Parts holds the content.
	Text string
	// Parts are the content's parts when it is an array of them.
	Parts []Part
	// Calls are the functions the message calls: its tool_calls', then its
	// legacy function_call.
	Calls []FunctionCall

	// from is the JSON it was read from.
	from json.RawMessage
}

// Part is one content part of a message.
type Part struct {
	// Type is the part's type: "text", "image_url", "refusal", …
	Type string
	// Text is a text part's text.
	Text string
	// Refusal is a refusal part's text.
	Refusal string
	// Detail is an image's detail level: image_url.detail, else detail.
	Detail string
}

// FunctionCall is one function a message calls: a tool call's function,
// or a legacy function_call.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ParseMessage reads one OpenAI chat message object. The returned Message
// keeps raw verbatim in Raw and carries the role, a text projection of the
// content (text parts joined, images as "[image]", tool calls as
// "[tool_call name(arguments)]") and what counting its tokens needs (see
// Decoded). It fails with ErrInvalid when raw is not a JSON object with a
// role.
func ParseMessage(raw json.RawMessage) (Message, error) {
	p := &Parsed{}
	content, err := decode(raw, p, true)
	if err != nil {
		return Message{}, err
	}
	return Message{Role: p.Role, Content: content, Raw: raw, parsed: p}, nil
}

// Decode reads raw as ParseMessage does, for what counting its tokens
// needs alone, and never fails: a message ParseMessage rejects comes back
// with what could be read of it (Malformed when raw is not a JSON object
// of a chat message's fields). It is how any message's JSON is counted,
// valid or not.
func Decode(raw json.RawMessage) Parsed {
	var p Parsed
	decode(raw, &p, false)
	return p
}

// Decoded returns what ParseMessage read of m.Raw (see Parsed): kept from
// the parse when m.Raw is still the JSON it read, else read now (Decode:
// a message built in code, read from a store, or given another Raw since).
func (m Message) Decoded() Parsed {
	if p := m.kept(); p != nil {
		return *p
	}
	return Decode(m.Raw)
}

// Bare returns m without what ParseMessage kept of its Raw (see Decoded):
// the message as a store reads it back, holding nothing a store need not
// keep.
func (m Message) Bare() Message {
	m.parsed = nil
	return m
}

// kept returns what ParseMessage read of m.Raw when m.Raw is still the
// JSON it read, else nil.
func (m Message) kept() *Parsed {
	if p := m.parsed; p != nil && len(m.Raw) > 0 && len(p.from) == len(m.Raw) && &p.from[0] == &m.Raw[0] {
		return p
	}
	return nil
}

// decode reads raw into p and, with text, returns the text projection of
// its content (see ParseMessage), or why it is not a valid message; p is
// filled even then.
func decode(raw json.RawMessage, p *Parsed, text bool) (string, error) {
	p.from = raw
	var w wireCounted
	if err := json.Unmarshal(raw, &w); err != nil {
		p.Malformed = true
		// Without what only the token count reads, it may still be a
		// valid message.
		var valid wireMessage
		if err := json.Unmarshal(raw, &valid); err != nil {
			return "", fmt.Errorf("%w: message is not a JSON object: %v", ErrInvalid, err)
		}
		w = wireCounted{Role: valid.Role, Content: valid.Content}
		w.Refusal = valid.Refusal
		for _, tc := range valid.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, struct {
				ID       stringOrNull `json:"id"`
				Type     stringOrNull `json:"type"`
				Function FunctionCall `json:"function"`
			}{Function: FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
	// A tool call's id and type only make a message invalid: it is
	// counted all the same.
	var invalid error
	for _, tc := range w.ToolCalls {
		if tc.ID.other || tc.Type.other {
			var valid wireMessage
			invalid = fmt.Errorf("%w: message is not a JSON object: %v", ErrInvalid, json.Unmarshal(raw, &valid))
			break
		}
	}
	p.Role = w.Role
	if !p.Malformed {
		p.Name = w.Name
		if w.Refusal != nil {
			p.Refusal = *w.Refusal
		}
		if n := len(w.ToolCalls); n > 0 || w.FunctionCall != nil {
			p.Calls = make([]FunctionCall, 0, n+1)
			for _, tc := range w.ToolCalls {
				p.Calls = append(p.Calls, tc.Function)
			}
			if w.FunctionCall != nil {
				p.Calls = append(p.Calls, *w.FunctionCall)
			}
		}
	}
	content, cerr := p.readContent(w.Content, text)
	if invalid != nil {
		return "", invalid
	}
	if w.Role == "" {
		return "", fmt.Errorf("%w: message has no role", ErrInvalid)
	}
	if cerr != nil {
		return "", cerr
	}
	if !text {
		return "", nil
	}
	var b strings.Builder
	b.WriteString(content)
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
	return b.String(), nil
}

// readContent reads a message's content c — a string, null, or an array of
// content parts — into p (unless p is Malformed) and, with text, returns
// its text projection: text parts joined, other parts as "[type]".
func (p *Parsed) readContent(c json.RawMessage, text bool) (string, error) {
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	if c[0] == '"' {
		// The message decoded, so a string without escapes is its own
		// text; the token count reads its bytes as they are (invalid
		// UTF-8 included), the text projection as encoding/json decodes
		// it.
		inner := c[1 : len(c)-1]
		plain := bytes.IndexByte(inner, '\\') < 0
		if plain && (!text || utf8.Valid(inner)) {
			s := string(inner)
			if !p.Malformed {
				p.Text = s
			}
			return s, nil
		}
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			if !p.Malformed {
				p.Text = string(c)
			}
			return "", fmt.Errorf("%w: content: %v", ErrInvalid, err)
		}
		if !p.Malformed {
			p.Text = s
			if plain {
				p.Text = string(inner)
			}
		}
		return s, nil
	}
	var parts []wirePart
	if err := json.Unmarshal(c, &parts); err != nil {
		// The token count reads such a content as text; a prompt still
		// shows it when its parts' types and texts read.
		if !p.Malformed {
			p.Text = string(c)
		}
		var valid []wirePartText
		if err := json.Unmarshal(c, &valid); err != nil {
			return "", fmt.Errorf("%w: content must be a string or an array of parts", ErrInvalid)
		}
		parts = make([]wirePart, len(valid))
		for i, vp := range valid {
			parts[i] = wirePart{Type: vp.Type, Text: vp.Text}
		}
	} else if !p.Malformed {
		p.Parts = make([]Part, len(parts))
		for i, wp := range parts {
			detail := wp.ImageURL.Detail
			if detail == "" {
				detail = wp.Detail
			}
			p.Parts[i] = Part{Type: wp.Type, Text: wp.Text, Refusal: wp.Refusal, Detail: detail}
		}
	}
	if !text {
		return "", nil
	}
	var b strings.Builder
	for _, wp := range parts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch wp.Type {
		case "text", "input_text", "output_text":
			b.WriteString(wp.Text)
		case "image_url", "input_image":
			b.WriteString("[image]")
		case "input_audio":
			b.WriteString("[audio]")
		default:
			b.WriteString("[" + wp.Type + "]")
		}
	}
	return b.String(), nil
}

// IsSystem reports whether a role belongs to the application's instructions
// (system or developer), which memgate never stores as history and never drops.
func IsSystem(role string) bool { return role == "system" || role == "developer" }

// IsResult reports whether a role is a call's result: a tool message
// ("tool"), or a legacy function call's ("function"). A call and the
// results after it are one unit, which a window or a cut never splits.
func IsResult(role string) bool { return role == "tool" || role == "function" }

// Fingerprint identifies a message's meaning for history alignment: its role
// and text (an assistant's without the white space around it:
// ComparedContent). Two messages with equal fingerprints are the same turn.
func (m Message) Fingerprint() string { return m.Role + "\x00" + m.ComparedContent() }

// replyTrim is the white space around a reply that clients drop: ASCII
// only, so that PostgreSQL's btrim computes the same reply digest
// (migrations/postgres/0035_reply_reasoning.sql).
const replyTrim = " \t\n\r\v\f"

// The tags of the reasoning block a reasoning model's reply opens with,
// as an OpenAI-compatible server relays it in the content (DeepSeek-R1,
// QwQ and many local models), which chat apps show apart and resend
// without.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// ComparedContent is m's text as a resent history is compared with what
// memgate stored: an assistant's reply without the white space around it
// (a model's reply often opens or closes with line breaks, which chat
// apps trim before they keep and resend it) and without the reasoning
// block it opens with, if any (answerText), anything else as it is. The
// stored text keeps both; only the comparison ignores them. PostgreSQL's
// memgate_reply_text computes the same text (for the digest of a reply
// its save-turn function stores): change both together.
func (m Message) ComparedContent() string {
	if m.Role == "assistant" {
		return answerText(m.Content)
	}
	return m.Content
}

// Answer is what memgate shows a model of m, or indexes for recall: an
// assistant's reply without the reasoning block it opens with, if any
// (afterReasoning: the block ComparedContent ignores), and the white space
// around what is left; anything else as it is. Providers advise against
// sending a model its past reasoning back, and it would spend the budget
// and match recall on what the model thought rather than what was said.
// The stored text keeps the block: it is what was captured. A reply that
// is only a block has the answer "".
func (m Message) Answer() string {
	if m.Role == "assistant" {
		if after, ok := afterReasoning(m.Content); ok {
			return strings.TrimRight(after, replyTrim)
		}
	}
	return m.Content
}

// answerText returns a reply's text s without the ASCII white space around it
// and without the reasoning block it opens with, if any (afterReasoning).
func answerText(s string) string {
	if after, ok := afterReasoning(s); ok {
		return strings.TrimRight(after, replyTrim)
	}
	return strings.Trim(s, replyTrim)
}

// afterReasoning returns what follows the well-formed reasoning block a
// reply's text s opens with, after the ASCII white space around it
// ("<think>", up to the first "</think>"), without the white space after
// the block; false when s opens with no such block. A block elsewhere, a
// second one, or one never closed is part of the answer.
func afterReasoning(s string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(s, replyTrim), thinkOpen)
	if !ok {
		return "", false
	}
	_, after, ok := strings.Cut(rest, thinkClose)
	if !ok {
		return "", false
	}
	return strings.TrimLeft(after, replyTrim), true
}

// Key returns the idempotency key of the i-th message stored for exchange id.
func Key(exchangeID string, i int) string { return fmt.Sprintf("%s:%d", exchangeID, i) }

// OfExchange returns the messages of msgs that storing exchange id
// inserted, those keyed Key(id, i), in msgs' order: how a hook finds a
// redelivered exchange's messages (its duplicate save inserts none) among
// its conversation's.
func OfExchange(id string, msgs []Message) []Message {
	var out []Message
	for _, m := range msgs {
		if i, ok := strings.CutPrefix(m.Key, id+":"); ok && i != "" && strings.Trim(i, "0123456789") == "" {
			out = append(out, m)
		}
	}
	return out
}

// Raws returns each message's Raw, in order: the messages as a prompt's
// JSON values.
func Raws(msgs []Message) []json.RawMessage {
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m.Raw
	}
	return out
}
