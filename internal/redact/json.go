package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// JSON returns raw with every string value redacted (object keys are left
// alone), and how many secrets were replaced. Everything else — key order,
// spacing, numbers — is kept byte for byte, so the result is raw itself when
// nothing was found. It fails with memory.ErrInvalid when raw is not valid JSON.
func (r *Redactor) JSON(raw []byte) ([]byte, int, error) {
	if r == nil {
		return raw, 0, nil
	}
	if !json.Valid(raw) {
		return nil, 0, fmt.Errorf("%w: not valid JSON", memory.ErrInvalid)
	}
	var out []byte // nil until the first change
	last, total := 0, 0
	for i := 0; i < len(raw); {
		if raw[i] != '"' {
			i++
			continue
		}
		end := stringEnd(raw, i)
		if isKey(raw, end) {
			i = end
			continue
		}
		lit := raw[i:end]
		var s string
		if bytes.IndexByte(lit, '\\') < 0 && utf8.Valid(lit) {
			s = string(lit[1 : len(lit)-1])
		} else if err := json.Unmarshal(lit, &s); err != nil {
			return nil, 0, fmt.Errorf("%w: string at %d: %v", memory.ErrInvalid, i, err)
		}
		red, n := r.String(s)
		if n > 0 {
			enc, err := quote(red)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, raw[last:i]...)
			out = append(out, enc...)
			last = end
			total += n
		}
		i = end
	}
	if out == nil {
		return raw, 0, nil
	}
	return append(out, raw[last:]...), total, nil
}

// stringEnd returns the index just past the JSON string literal starting at
// raw[start] (a quote); raw is known to be valid JSON.
func stringEnd(raw []byte, start int) int {
	for j := start + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}

// isKey reports whether the string literal ending before raw[end] is an
// object key: the next non-space byte is a colon.
func isKey(raw []byte, end int) bool {
	for j := end; j < len(raw); j++ {
		switch raw[j] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// quote encodes s as a JSON string without HTML escaping.
func quote(s string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encode redacted string: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
