package admin

import (
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// messageFrame bounds what a message's JSON holds besides its strings and
// raw message: the keys, punctuation, seq, token counts and timestamp.
const messageFrame = 256

// encodedSize is about the size of m as encoding/json writes it in an
// answer (an upper bound but for its numbers and time, messageFrame),
// escapes included: a '<' of its text takes six bytes, a '"' two.
func encodedSize(m memory.Message) int {
	return messageFrame + stringSize(m.Content) + stringSize(m.Key) + stringSize(m.Role) +
		stringSize(m.Conversation) + rawSize(m.Raw)
}

// stringSize is the length of s as encoding/json writes it (quoted, with
// HTML escaping): a control character or one of <, > and & as \u00XX, a
// quote, a backslash, \b, \f, \n, \r and \t with a backslash, an invalid
// byte as \ufffd, U+2028 and U+2029 as \u2028 and \u2029.
func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// rawSize bounds the length of raw JSON as encoding/json writes it
// (compacted, with HTML escaping): <, > and & as \u00XX, U+2028 and
// U+2029 as \u2028 and \u2029; null when empty.
func rawSize(raw []byte) int {
	if len(raw) == 0 {
		return len("null")
	}
	n := len(raw)
	for i, b := range raw {
		switch {
		case b == '<' || b == '>' || b == '&':
			n += 5
		case b == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			n += 3
		}
	}
	return n
}
