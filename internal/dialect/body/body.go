// Package body holds a JSON request body as its top-level members, each kept
// as the exact bytes the client sent, so a gateway can rewrite one member and
// forward every other one unchanged, in the client's order.
package body

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// ErrNotObject reports a body that is not one JSON object.
var ErrNotObject = errors.New("body is not a JSON object")

// Object is a JSON object's members in their original order.
type Object struct {
	keys []string
	vals map[string]json.RawMessage
	// repeated is the first key given twice ("" when none).
	repeated string
}

// Parse reads b, which must hold exactly one JSON object. Member values are
// the client's bytes; of a repeated key the last value wins (as in
// encoding/json) at the first key's position.
func Parse(b []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ErrNotObject
	}
	o := &Object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotObject, err)
		}
		key := tok.(string) // inside an object the decoder yields keys as strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: member %q: %v", ErrNotObject, key, err)
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		} else if o.repeated == "" {
			o.repeated = key
		}
		o.vals[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the object", ErrNotObject)
	}
	return o, nil
}

// Repeated returns the first key the parsed object gave twice (exactly,
// once unescaped), "" when none: of its values Get returns the last, and
// another parser may read the first.
func (o *Object) Repeated() string { return o.repeated }

// Get returns the member's bytes, or nil when it is absent.
func (o *Object) Get(key string) json.RawMessage { return o.vals[key] }

// Has reports whether the member is present and not null.
func (o *Object) Has(key string) bool {
	v, ok := o.vals[key]
	return ok && string(v) != "null"
}

// Clone returns a copy that can be changed without changing o.
func (o *Object) Clone() *Object {
	c := &Object{keys: append([]string(nil), o.keys...), vals: make(map[string]json.RawMessage, len(o.vals)), repeated: o.repeated}
	for k, v := range o.vals {
		c.vals[k] = v
	}
	return c
}

// Set replaces the member's value, or appends the member when it is absent.
// v must be valid JSON.
func (o *Object) Set(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// Delete removes the member, if present.
func (o *Object) Delete(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	o.keys = slices.DeleteFunc(o.keys, func(k string) bool { return k == key })
}

// Bytes encodes the object: members in order, each value as stored.
func (o *Object) Bytes() []byte {
	n := 2
	for _, k := range o.keys {
		n += len(k) + len(o.vals[k]) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k) // a string always encodes
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, o.vals[k]...)
	}
	return append(b, '}')
}

// Array encodes elements as a JSON array, each element as given.
func Array(elems []json.RawMessage) json.RawMessage {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// Marshal encodes v like json.Marshal, but leaves <, > and & unescaped so
// text memgate writes reads as the client would have written it.
func Marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// FieldError reports a request member that breaks the dialect's rules. It
// matches memory.ErrInvalid under errors.Is; Param names the member as
// OpenAI's and Anthropic's error bodies do ("messages[2].content").
type FieldError struct {
	Param string
	Msg   string
}

// Invalid returns a *FieldError for param.
func Invalid(param, format string, args ...any) error {
	return &FieldError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Error returns "param: message".
func (e *FieldError) Error() string {
	if e.Param == "" {
		return e.Msg
	}
	return e.Param + ": " + e.Msg
}

// Is reports whether target is memory.ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == memory.ErrInvalid }

// NonEmptyArray reports whether v is a JSON array with at least one
// element: how a request's tools (or functions) member declares tools.
func NonEmptyArray(v json.RawMessage) bool {
	var elems []json.RawMessage
	return json.Unmarshal(v, &elems) == nil && len(elems) > 0
}
