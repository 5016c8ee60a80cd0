// Package anthropic adapts the Anthropic Messages API (POST /v1/messages) to
// memgate's memory core: a request's system prompt and messages become chat
// messages for inject and capture, an assembled prompt becomes a Messages
// body again, and replies — whole or streamed — become the chat assistant
// message capture stores. Everything memgate does not rewrite is forwarded
// as the client sent it.
package anthropic

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// Request is a Messages API request body, read once.
type Request struct {
	// Model, Stream and MaxTokens are the body's model, stream and
	// max_tokens; User is metadata.user_id ("" when absent).
	Model     string
	Stream    bool
	MaxTokens int
	User      string
	// NoTools is true when the body declares no tools (tools is not a
	// non-empty array; memory.Request.NoTools).
	NoTools bool
	// Thinking is true when the body turns extended thinking on (thinking
	// of a type other than disabled; memory.Request.ReplaysThinking).
	Thinking bool
	// Conversation holds the conversation in chat format for the memory
	// core: the system prompt as one system message when there is one
	// (origin -1), then each message's blocks as chat messages (see ToChat),
	// each with the index in the client's messages it came from.
	chat.Conversation

	// Breakpoints asks Render to add cache_control breakpoints after the
	// stable part of the prompt (see cache.go).
	Breakpoints bool

	obj         *body.Object
	breakpoints int               // the client's own cache_control blocks
	system      json.RawMessage   // the client's system member (nil when absent)
	sysChat     json.RawMessage   // Messages[0] when the system prompt made one
	messages    []json.RawMessage // the client's messages, verbatim
	// thinkingOff is set by Render when it turned the client's thinking
	// off (ThinkingDisabled).
	thinkingOff bool
	// container is the id of the container the body names, when
	// namesContainer; containerRepeated the first member its container
	// object gives twice (readContainer).
	container         string
	namesContainer    bool
	containerRepeated string
	// files are the Files API ids the messages name (readFiles).
	files []string
}

// ParseRequest reads a Messages API request body. It fails with a
// *body.FieldError (matching memory.ErrInvalid) when the body is not a JSON
// object, model is not a non-empty string, messages is not a non-empty array
// of {role: user|assistant, content: string|blocks}, or system, stream,
// max_tokens or metadata.user_id has the wrong type.
func ParseRequest(b []byte) (*Request, error) {
	obj, err := body.Parse(b)
	if err != nil {
		return nil, body.Invalid("", "%v", err)
	}
	r := &Request{obj: obj, breakpoints: clientBreakpoints(b)}
	if err := decodeMember(obj, "model", &r.Model); err != nil || r.Model == "" {
		return nil, body.Invalid("model", "model must be a non-empty string")
	}
	if err := decodeMember(obj, "stream", &r.Stream); err != nil {
		return nil, body.Invalid("stream", "stream must be a boolean")
	}
	if err := decodeMember(obj, "max_tokens", &r.MaxTokens); err != nil {
		return nil, body.Invalid("max_tokens", "max_tokens must be an integer")
	}
	if obj.Has("metadata") {
		var md struct {
			UserID *string `json:"user_id"`
		}
		if err := json.Unmarshal(obj.Get("metadata"), &md); err != nil {
			return nil, body.Invalid("metadata", "metadata must be an object whose user_id is a string")
		}
		if md.UserID != nil {
			r.User = *md.UserID
		}
	}
	r.NoTools = !body.NonEmptyArray(obj.Get("tools"))
	r.readContainer()
	r.files = readFiles(b)
	if obj.Has("thinking") {
		var th struct {
			Type string `json:"type"`
		}
		// A thinking member memgate cannot read is the provider's to refuse.
		r.Thinking = json.Unmarshal(obj.Get("thinking"), &th) == nil && th.Type != "" && th.Type != "disabled"
	}
	if err := r.readSystem(); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(obj.Get("messages"), &r.messages); err != nil || len(r.messages) == 0 {
		return nil, body.Invalid("messages", "messages must be a non-empty array")
	}
	for i, raw := range r.messages {
		param := "messages[" + strconv.Itoa(i) + "]"
		role, blocks, text, err := decodeMessage(raw)
		if err != nil {
			return nil, body.Invalid(param, "%v", err)
		}
		msgs, err := toChat(role, blocks, text, role == "assistant" && memory.Lossless(raw))
		if err != nil {
			return nil, body.Invalid(param, "%v", err)
		}
		for _, m := range msgs {
			if _, err := r.Add(m, i); err != nil {
				return nil, body.Invalid(param, "%v", err)
			}
		}
	}
	return r, nil
}

// decodeMember decodes the member into v when it is present and not null.
func decodeMember(obj *body.Object, key string, v any) error {
	if !obj.Has(key) {
		return nil
	}
	return json.Unmarshal(obj.Get(key), v)
}

// readSystem reads the system member: a string or an array of text blocks,
// joined into one chat system message.
func (r *Request) readSystem() error {
	if !r.obj.Has("system") {
		return nil
	}
	r.system = r.obj.Get("system")
	var text string
	if r.system[0] == '"' {
		if err := json.Unmarshal(r.system, &text); err != nil {
			return body.Invalid("system", "system must be a string or an array of text blocks")
		}
	} else {
		var blocks []block
		if err := json.Unmarshal(r.system, &blocks); err != nil {
			return body.Invalid("system", "system must be a string or an array of text blocks")
		}
		parts := make([]chat.Part, 0, len(blocks))
		for _, b := range blocks {
			if b.Type == "text" {
				parts = append(parts, chat.Part{Type: "text", Text: b.Text})
			}
		}
		text = chat.TextOf(parts)
	}
	if text == "" {
		return nil
	}
	if _, err := r.Add(chat.Message{Role: "system", Content: chat.Text(text)}, -1); err != nil {
		return body.Invalid("system", "%v", err)
	}
	r.sysChat = r.Messages[0].Raw
	return nil
}

// decodeMessage reads one Anthropic message: its role and either its blocks
// or its string content.
func decodeMessage(raw json.RawMessage) (role string, blocks []block, text *string, err error) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", nil, nil, fmt.Errorf("a message must be an object: %v", err)
	}
	if m.Role != "user" && m.Role != "assistant" {
		return "", nil, nil, fmt.Errorf("role must be user or assistant, not %q", m.Role)
	}
	if len(m.Content) > 0 && m.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return "", nil, nil, fmt.Errorf("content: %v", err)
		}
		return m.Role, nil, &s, nil
	}
	if err := json.Unmarshal(m.Content, &blocks); err != nil || blocks == nil {
		return "", nil, nil, fmt.Errorf("content must be a string or an array of content blocks")
	}
	for i, b := range blocks {
		if b.Type == "" {
			return "", nil, nil, fmt.Errorf("content[%d] has no type", i)
		}
	}
	return m.Role, blocks, nil, nil
}
