package chat

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// Render returns the body to send upstream for p, the memory core's answer
// to this request: the client's body with its messages replaced by p's
// (see WithMessages).
func (r *Request) Render(p memory.Prepared) ([]byte, error) { return r.WithMessages(p.Messages) }

// WithMessages returns the body with its messages replaced by msgs; every
// other field keeps the client's value, byte for byte, keys in sorted order.
// The client's values were read by ParseRequest (each one JSON value), so they are
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
