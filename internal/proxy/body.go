package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// chatBody is what the proxy reads from a chat completion request. The body
// itself stays as the client sent it; only the span of the messages value is
// ever replaced.
type chatBody struct {
	raw []byte
	// msgStart and msgEnd delimit the messages array in raw.
	msgStart, msgEnd int
	// messages are the array's elements, slices of raw.
	messages     []json.RawMessage
	model        string
	user         string
	stream       bool
	includeUsage bool
	maxTokens    int
}

// parseChat reads a chat completion body without decoding what the proxy
// does not own: it validates the JSON, then scans the top-level fields for
// model, stream, stream_options.include_usage, user, max_tokens,
// max_completion_tokens and the messages array. A repeated key counts by its
// last occurrence, as in encoding/json.
func parseChat(raw []byte) (chatBody, *apiError) {
	b := chatBody{raw: raw, msgStart: -1}
	if !validJSON(raw) {
		return b, invalid("", "We could not parse the JSON body of your request. The body must be valid JSON.")
	}
	i := skipWS(raw, 0)
	if raw[i] != '{' {
		return b, invalid("", "The request body must be a JSON object.")
	}
	err := eachField(raw, i, func(key []byte, vs, ve int) *apiError {
		v := raw[vs:ve]
		switch string(key) {
		case "messages":
			b.msgStart, b.msgEnd = vs, ve
		case "model":
			b.model = jsonString(v)
		case "user":
			b.user = jsonString(v)
		case "stream":
			b.stream = string(v) == "true"
		case "max_tokens", "max_completion_tokens":
			if n, err := strconv.Atoi(string(v)); err == nil && n > 0 {
				b.maxTokens = n
			}
		case "stream_options":
			b.includeUsage = false
			if v[0] == '{' {
				return eachField(raw, vs, func(k []byte, s, e int) *apiError {
					if string(k) == "include_usage" {
						b.includeUsage = string(raw[s:e]) == "true"
					}
					return nil
				})
			}
		}
		return nil
	})
	if err != nil {
		return b, err
	}
	if b.msgStart < 0 || raw[b.msgStart] != '[' {
		return b, invalid("messages", "You must provide a messages parameter: an array of message objects.")
	}
	b.messages = make([]json.RawMessage, 0, 16)
	for i := skipWS(raw, b.msgStart+1); raw[i] != ']'; {
		end := skipValue(raw, i)
		b.messages = append(b.messages, json.RawMessage(raw[i:end]))
		i = skipWS(raw, end)
		if raw[i] == ',' {
			i = skipWS(raw, i+1)
		}
	}
	if len(b.messages) == 0 {
		return b, invalid("messages", "messages must contain at least one message.")
	}
	return b, nil
}

// withMessages returns the body with the messages array replaced by msgs;
// every other byte is the client's.
func (b *chatBody) withMessages(msgs []json.RawMessage) []byte {
	n := len(b.raw) - (b.msgEnd - b.msgStart) + 2
	for _, m := range msgs {
		n += len(m) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, b.raw[:b.msgStart]...)
	out = append(out, '[')
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	out = append(out, ']')
	return append(out, b.raw[b.msgEnd:]...)
}

// eachField calls fn with each key of the valid JSON object starting at
// raw[i] and the span of its value. Keys with escapes are unescaped.
func eachField(raw []byte, i int, fn func(key []byte, vs, ve int) *apiError) *apiError {
	i = skipWS(raw, i+1)
	for raw[i] != '}' {
		ke := skipString(raw, i)
		key := raw[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			json.Unmarshal(raw[i:ke], &s)
			key = []byte(s)
		}
		vs := skipWS(raw, skipWS(raw, ke)+1)
		ve := skipValue(raw, vs)
		if err := fn(key, vs, ve); err != nil {
			return err
		}
		i = skipWS(raw, ve)
		if raw[i] == ',' {
			i = skipWS(raw, i+1)
		}
	}
	return nil
}

// jsonString returns the string a JSON value holds, or "" when it is not a
// string.
func jsonString(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	var s string
	json.Unmarshal(v, &s)
	return s
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		if !scanStop[b[i]] {
			continue
		}
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// scanStop marks the bytes skipString and skipValue look at: quotes,
// backslashes and brackets. Every other byte is skipped with one table
// load.
var scanStop = func() (t [256]bool) {
	for _, c := range `"\{}[]` {
		t[c] = true
	}
	return t
}()

// skipValue returns the index after the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			if !scanStop[b[i]] {
				i++
				continue
			}
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
