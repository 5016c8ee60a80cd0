// Package chat adapts the OpenAI Chat Completions API (POST
// /v1/chat/completions) to memgate's memory core, and holds the chat
// messages every adapter speaks: the memory core stores Chat Completions
// messages, so the Anthropic and Responses adapters turn their turns into
// these messages on the way in and stored ones back into their own on the
// way out.
//
// request.go reads a body once (ParseRequest), render.go writes the
// assembled prompt back into it (Render), reply.go and stream.go read the
// upstream's reply, whole or streamed, into the assistant message the
// memory core stores, message.go holds the message types, and prompt.go
// what the adapters share around an assembled prompt.
package chat

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

// Request is a chat completion request body, read once with encoding/json
// into the fields memgate acts on; every other field stays the client's
// JSON (json.RawMessage), so a body whose messages memory does not rewrite
// is forwarded byte for byte, and one whose messages it rewrites keeps
// every other field's value.
type Request struct {
	// Raw is the body as the client sent it.
	Raw []byte
	// fields are the body's top-level fields, values verbatim.
	fields map[string]json.RawMessage
	// Messages are the elements of the messages array, each read once by
	// memory.ParseMessage (Raw: the element as the client sent it).
	Messages []memory.Message

	Model string
	// User and SafetyIdentifier are the body's user and safety_identifier
	// (OpenAI's replacement for user), "" when absent or not strings.
	User, SafetyIdentifier string
	Stream                 bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// MaxTokens is max_completion_tokens, else max_tokens (0 if absent).
	MaxTokens int
	// NoTools is true when the body declares no tools: neither tools nor
	// the legacy functions is a non-empty array (memory.Request.NoTools).
	NoTools bool
}

// knownRoles are the message roles of the Chat Completions API.
var knownRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// ParseRequest reads a chat completion body. It accepts exactly one JSON
// object with a non-empty messages array of valid messages, and fails
// with a *body.FieldError naming the offending parameter otherwise. A
// repeated key counts by its last occurrence, as in encoding/json.
func ParseRequest(raw []byte) (*Request, error) {
	r := &Request{Raw: raw}
	if err := json.Unmarshal(raw, &r.fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, body.Invalid("", "The request body must be a JSON object.")
		}
		return nil, body.Invalid("", "We could not parse the JSON body of your request. The body must be valid JSON.")
	}
	if r.fields == nil {
		return nil, body.Invalid("", "The request body must be a JSON object.")
	}
	f := r.fields
	// Fields of the wrong type are the upstream's to reject; memgate reads
	// what it can and forwards the rest.
	if v, ok := f["model"]; ok {
		json.Unmarshal(v, &r.Model)
	}
	if v, ok := f["user"]; ok {
		json.Unmarshal(v, &r.User)
	}
	if v, ok := f["safety_identifier"]; ok {
		json.Unmarshal(v, &r.SafetyIdentifier)
	}
	if v, ok := f["stream"]; ok {
		json.Unmarshal(v, &r.Stream)
	}
	if v, ok := f["stream_options"]; ok {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		json.Unmarshal(v, &so)
		r.IncludeUsage = so.IncludeUsage
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		var n int
		if v, ok := f[k]; ok && json.Unmarshal(v, &n) == nil && n > 0 {
			r.MaxTokens = n
		}
	}
	r.NoTools = !body.NonEmptyArray(f["tools"]) && !body.NonEmptyArray(f["functions"])
	msgs, ok := f["messages"]
	var elems []json.RawMessage
	if !ok || json.Unmarshal(msgs, &elems) != nil || elems == nil {
		return nil, body.Invalid("messages", "You must provide a messages parameter: an array of message objects.")
	}
	if len(elems) == 0 {
		return nil, body.Invalid("messages", "messages must contain at least one message.")
	}
	r.Messages = make([]memory.Message, len(elems))
	for i, m := range elems {
		p, err := memory.ParseMessage(m)
		if err != nil {
			return nil, body.Invalid("messages["+strconv.Itoa(i)+"]", "%s", err.Error())
		}
		if !knownRoles[p.Role] {
			// A role OpenAI does not define ("System", "user ", "critic")
			// would be stored and replayed, and a lenient upstream may
			// read it as another role, system included.
			return nil, body.Invalid("messages["+strconv.Itoa(i)+"].role",
				"Invalid value: %q. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.", p.Role)
		}
		r.Messages[i] = p
	}
	return r, nil
}

// Memory returns what the memory core is asked for this request, for id in
// mode; the memory headers (X-Memory-Budget, X-Memory-Cross) are the
// caller's to read.
func (r *Request) Memory(id memory.Identity, mode memory.Mode) memory.Request {
	return memory.Request{
		Identity:  id,
		Mode:      mode,
		Model:     r.Model,
		Messages:  r.Messages,
		MaxTokens: r.MaxTokens,
		NoTools:   r.NoTools,
	}
}
