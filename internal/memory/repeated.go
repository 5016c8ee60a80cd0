package memory

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// manyKeys is how many keys an object holds before RepeatedKey looks its
// keys up in a map rather than comparing each with every other.
const manyKeys = 16

// keyFrame is a JSON value RepeatedKey is inside: an object, with the keys
// read in it, or an array.
type keyFrame struct {
	object bool
	keys   []string            // while at most manyKeys
	folded map[string]struct{} // foldKey of every key, past manyKeys
}

// RepeatedKey returns the first key that an object of raw, at any depth,
// gives twice: two keys equal once unescaped ("\u0072ole" is "role"), or
// equal but for case as encoding/json matches a key to a field
// (strings.EqualFold: "ROLE", "tool_callſ"). It reads raw with
// encoding/json's tokenizer, in time and memory linear in raw; raw that is
// not well-formed JSON reports none (decoding it reports that).
//
// A message whose JSON is stored and replayed verbatim must have none:
// parsers disagree on such a key's value (encoding/json keeps the last,
// others the first, or reject the object), so {"role":"system",
// "role":"user"}, checked and stored by memgate as a user turn, would be
// read as a system message by an upstream keeping the first when the turn
// is replayed.
func RepeatedKey(raw []byte) (key string, found bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers are not parsed
	var frames []keyFrame
	wantKey := false // the next token is a key of the innermost object
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // the end, or malformed JSON
		}
		n := len(frames)
		inObject := n > 0 && frames[n-1].object
		if s, ok := tok.(string); ok && inObject && wantKey {
			if frames[n-1].add(s) {
				return s, true
			}
			wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if n < cap(frames) { // reuse the frame's key slice
				frames = frames[:n+1]
				frames[n].keys, frames[n].folded = frames[n].keys[:0], nil
			} else {
				frames = append(frames, keyFrame{})
			}
			frames[n].object = tok == json.Delim('{')
			wantKey = frames[n].object
		case json.Delim('}'), json.Delim(']'):
			frames = frames[:n-1]
			wantKey = n > 1 && frames[n-2].object // a member's value ended
		default:
			wantKey = inObject // a member's scalar value
		}
	}
}

// add records key in f and reports whether f held it already (EqualFold).
func (f *keyFrame) add(key string) (repeated bool) {
	if f.folded != nil {
		k := foldKey(key)
		if _, repeated = f.folded[k]; !repeated {
			f.folded[k] = struct{}{}
		}
		return repeated
	}
	for _, k := range f.keys {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	if f.keys = append(f.keys, key); len(f.keys) > manyKeys {
		f.folded = make(map[string]struct{}, 2*len(f.keys))
		for _, k := range f.keys {
			f.folded[foldKey(k)] = struct{}{}
		}
	}
	return false
}

// foldKey returns s folded so that foldKey(a) == foldKey(b) exactly when
// strings.EqualFold(a, b), as encoding/json folds a key to match a field:
// every rune replaced by the smallest of its simple-fold orbit (ASCII
// letters by their capital).
func foldKey(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			out = append(out, byte(r))
			continue
		}
		out = utf8.AppendRune(out, foldRune(r))
	}
	return string(out)
}

// foldRune returns the smallest rune of r's simple-fold orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
