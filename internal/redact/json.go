package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// JSON returns raw with its secrets redacted, and how many were replaced:
//   - every string value, through String; a string value that is itself a
//     JSON object or array (tool-call arguments) is redacted as JSON, so the
//     rules below apply inside it and it stays valid JSON;
//   - the value of a key that names a credential ("password", "api_key",
//     "client_secret", "token", "cvv"...): a string or number becomes the
//     placeholder string of its kind;
//   - a number that is a card number becomes "[redacted:card]";
//   - an object key holding a secret is redacted like a string.
//
// Everything else — key order, spacing, other numbers — is kept byte for
// byte, so the result is raw itself when nothing was found. It fails with
// memory.ErrInvalid when raw is not valid JSON.
func (r *Redactor) JSON(raw []byte) ([]byte, int, error) {
	if r == nil {
		return raw, 0, nil
	}
	if !json.Valid(raw) {
		return nil, 0, fmt.Errorf("%w: not valid JSON", memory.ErrInvalid)
	}
	return r.json(raw, 0, nil)
}

// maxNested bounds how deep JSON held in strings is redacted as JSON; deeper
// strings are redacted as text.
const maxNested = 4

// json redacts valid JSON raw; depth counts the strings it is nested in.
func (r *Redactor) json(raw []byte, depth int, m *meter) ([]byte, int, error) {
	var out []byte // nil until the first change
	last, total := 0, 0
	replace := func(from, to int, with []byte, n int) {
		out = append(out, raw[last:from]...)
		out = append(out, with...)
		last = to
		total += n
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '-' || isDigit(c) {
			end := numberEnd(raw, i)
			m.add(end - i)
			if end-i >= 13 && end-i <= 19 && cardNumber(string(raw[i:end])) {
				replace(i, end, []byte(`"`+Placeholder("card")+`"`), 1)
			}
			i = end
			continue
		}
		if c != '"' {
			i++
			m.add(1)
			continue
		}
		end := stringEnd(raw, i)
		m.add(end - i)
		s, err := unquote(raw[i:end])
		if err != nil {
			return nil, 0, fmt.Errorf("%w: string at %d: %v", memory.ErrInvalid, i, err)
		}
		if !isKey(raw, end) {
			red, n, err := r.value(s, depth, m)
			if err != nil {
				return nil, 0, err
			}
			if n > 0 {
				enc, err := quote(red)
				if err != nil {
					return nil, 0, err
				}
				replace(i, end, enc, n)
			}
			i = end
			continue
		}
		if red, n := r.redact(s, m); n > 0 {
			enc, err := quote(red)
			if err != nil {
				return nil, 0, err
			}
			replace(i, end, enc, n)
		}
		i = end
		kind := fieldKind(s)
		if kind == "" {
			continue
		}
		// The value of a credential field: a string or a number.
		j := skipSpace(raw, end)
		j = skipSpace(raw, j+1) // past the colon
		switch {
		case j < len(raw) && raw[j] == '"':
			vend := stringEnd(raw, j)
			v, err := unquote(raw[j:vend])
			if err != nil {
				return nil, 0, fmt.Errorf("%w: string at %d: %v", memory.ErrInvalid, j, err)
			}
			if credentialValue(v) {
				// A value that is a recognised secret keeps its own kind.
				with := Placeholder(kind)
				if red, n := r.redact(v, m); n == 1 && redactedAlready(red) && strings.Count(red, "[redacted:") == 1 {
					with = red
				}
				replace(j, vend, []byte(`"`+with+`"`), 1)
			}
			i = vend
		case j < len(raw) && (raw[j] == '-' || isDigit(raw[j])):
			vend := numberEnd(raw, j)
			replace(j, vend, []byte(`"`+Placeholder(kind)+`"`), 1)
			i = vend
		}
	}
	if out == nil {
		return raw, 0, nil
	}
	return append(out, raw[last:]...), total, nil
}

// value redacts a string value: as JSON when it holds a JSON object or array
// (and depth allows), else as text.
func (r *Redactor) value(s string, depth int, m *meter) (string, int, error) {
	if t := strings.TrimSpace(s); depth < maxNested && len(t) > 1 &&
		(t[0] == '{' && t[len(t)-1] == '}' || t[0] == '[' && t[len(t)-1] == ']') && json.Valid([]byte(s)) {
		m.add(len(s))
		red, n, err := r.json([]byte(s), depth+1, m)
		if err != nil {
			return "", 0, err
		}
		return string(red), n, nil
	}
	red, n := r.redact(s, m)
	return red, n, nil
}

// unquote decodes a JSON string literal.
func unquote(lit []byte) (string, error) {
	if bytes.IndexByte(lit, '\\') < 0 && utf8.Valid(lit) {
		return string(lit[1 : len(lit)-1]), nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// numberEnd returns the index just past the JSON number starting at raw[i].
func numberEnd(raw []byte, i int) int {
	j := i
	for j < len(raw) && (isDigit(raw[j]) || strings.IndexByte("+-.eE", raw[j]) >= 0) {
		j++
	}
	return j
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
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
