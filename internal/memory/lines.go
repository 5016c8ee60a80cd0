package memory

import (
	"strings"
	"unicode/utf8"
)

// IsBreak reports whether r is a character a reader, or a model, may take
// as the end of a line: "\n", "\r", vertical tab, form feed, NEL, the
// Unicode line and paragraph separators, the information separators
// (U+001C–U+001E, paragraph breaks to Python's str.splitlines and to
// Unicode's bidirectional algorithm) — and, since what a tokenizer or a
// model makes of them is anyone's guess, every other C0 and C1 control
// (U+0000–U+001F, U+007F–U+009F) but the tab: none of them is text.
func IsBreak(r rune) bool {
	return r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f || r == '\u2028' || r == '\u2029'
}

// indexBreak returns the index of the first line break (IsBreak) in s,
// -1 when it has none. It reads ASCII a byte at a time.
func indexBreak(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if IsBreak(rune(c)) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if IsBreak(r) {
			return i
		}
		i += size
	}
	return -1
}

// IndentBreaks returns s with every line break (IsBreak: "\r\n", "\r",
// "\n", vertical tab, form feed, NEL, the Unicode line and paragraph
// separators, and every other control but the tab) replaced by "\n" and
// indent: s itself when it has none.
//
// Stored text is shown in the memory block under memgate's own layout —
// headings and bullets that start a line. Indenting what stored text puts
// on a new line keeps every line it writes deeper than memgate's own, so
// a message cannot forge a heading, a date or another turn (house rule 25).
func IndentBreaks(s, indent string) string {
	i := indexBreak(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 4*(len(indent)+1))
	for i >= 0 {
		b.WriteString(s[:i])
		b.WriteByte('\n')
		b.WriteString(indent)
		_, n := utf8.DecodeRuneInString(s[i:])
		if strings.HasPrefix(s[i:], "\r\n") {
			n = 2
		}
		s = s[i+n:]
		i = indexBreak(s)
	}
	b.WriteString(s)
	return b.String()
}

// Truncate cuts s to at most n bytes on a rune boundary (n <= 0: s
// whole).
func Truncate(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
