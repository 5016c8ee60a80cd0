// Package chatreq reads an OpenAI Chat Completions request body once, with
// encoding/json, into the fields memgate acts on; every other field stays
// the client's JSON (json.RawMessage), so a body whose messages memory does
// not rewrite is forwarded byte for byte, and one whose messages it rewrites
// keeps every other field's value.
package chatreq

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
)

// Request is a parsed chat completion request.
type Request struct {
	// Raw is the body as the client sent it.
	Raw []byte
	// fields are the body's top-level fields, values verbatim.
	fields map[string]json.RawMessage
	// Messages are the elements of the messages array, verbatim.
	Messages []json.RawMessage
	// Parsed are Messages read by memory.ParseMessage, index for index.
	Parsed []memory.Message

	Model  string
	User   string
	Stream bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// MaxTokens is max_completion_tokens, else max_tokens (0 if absent).
	MaxTokens int
}

// Parse reads a chat completion body. It accepts exactly one JSON object
// with a non-empty messages array of valid messages, and answers anything
// else with a 400 naming the offending parameter. A repeated key counts by
// its last occurrence, as in encoding/json.
func Parse(raw []byte) (*Request, *apierr.Error) {
	r := &Request{Raw: raw}
	if err := json.Unmarshal(raw, &r.fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, apierr.Invalid("", "The request body must be a JSON object.")
		}
		return nil, apierr.Invalid("", "We could not parse the JSON body of your request. The body must be valid JSON.")
	}
	if r.fields == nil {
		return nil, apierr.Invalid("", "The request body must be a JSON object.")
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
	msgs, ok := f["messages"]
	if !ok || json.Unmarshal(msgs, &r.Messages) != nil || r.Messages == nil {
		return nil, apierr.Invalid("messages", "You must provide a messages parameter: an array of message objects.")
	}
	if len(r.Messages) == 0 {
		return nil, apierr.Invalid("messages", "messages must contain at least one message.")
	}
	r.Parsed = make([]memory.Message, len(r.Messages))
	for i, m := range r.Messages {
		p, err := memory.ParseMessage(m)
		if err != nil {
			return nil, apierr.Invalid("messages["+strconv.Itoa(i)+"]", err.Error())
		}
		r.Parsed[i] = p
	}
	return r, nil
}

// WithMessages returns the body with its messages replaced by msgs; every
// other field keeps the client's value, byte for byte, keys in sorted order.
// The client's values were read by Parse (each one JSON value), so they are
// joined as they are rather than re-encoded: re-encoding compacted the
// prompt twice over, a tenth of a memory-on request's CPU. Each of msgs
// must be exactly one JSON value, as memory.Prepared's messages are (the
// assembler checks the stored ones where they enter the prompt): checking
// them all again here cost 70-120 µs per request for the memory block
// memgate encoded itself.
func (r *Request) WithMessages(msgs []json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(r.fields)+1)
	size := 2
	for k, v := range r.fields {
		if k != "messages" {
			keys = append(keys, k)
			size += len(k) + len(v) + 4
		}
	}
	keys = append(keys, "messages")
	slices.Sort(keys)
	for _, m := range msgs {
		size += len(m) + 1
	}
	out := make([]byte, 0, size+16)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = appendKey(out, k); err != nil {
			return nil, err
		}
		if k != "messages" {
			out = append(out, r.fields[k]...)
			continue
		}
		out = append(out, '[')
		for j, m := range msgs {
			if j > 0 {
				out = append(out, ',')
			}
			out = append(out, m...)
		}
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// appendKey appends k as a JSON string and a colon: plain names as they
// are, others by encoding/json without HTML escaping.
func appendKey(dst []byte, k string) ([]byte, error) {
	plain := true
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c == '_' || c == '-' || c == '.' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, k...)
		return append(dst, '"', ':'), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(k); err != nil {
		return nil, err
	}
	dst = append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
	return append(dst, ':'), nil
}

// Memory builds what the memory layer is asked for this request, reading
// the memory headers (see Headers).
func (r *Request) Memory(h http.Header, id memory.Identity, mode memory.Mode) (memory.Request, *apierr.Error) {
	return Headers(h, memory.Request{
		Identity:  id,
		Mode:      mode,
		Model:     r.Model,
		Messages:  r.Messages,
		Parsed:    r.Parsed,
		MaxTokens: r.MaxTokens,
	})
}

// Headers completes req, a memory request of any API, with the request's
// X-Memory-Budget (a whole number ≥ 1) and X-Memory-Cross (off disables
// cross-conversation recall) headers.
func Headers(h http.Header, req memory.Request) (memory.Request, *apierr.Error) {
	req.CrossConversation = !strings.EqualFold(strings.TrimSpace(h.Get("X-Memory-Cross")), "off")
	if v := h.Get("X-Memory-Budget"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return req, apierr.Invalid("X-Memory-Budget", "X-Memory-Budget must be a whole number of tokens, at least 1.")
		}
		req.Budget = n
	}
	return req, nil
}

// NewConversationID returns a random conversation id (valid per
// memory.ValidID) for a memory-on request that names none.
func NewConversationID() string {
	var b [12]byte
	rand.Read(b[:])
	return "conv-" + hex.EncodeToString(b[:])
}
