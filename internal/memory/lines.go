package memory

import (
	"strings"
	"unicode/utf8"
)

// lineBreaks are the characters a reader, or a model, may take as the end
// of a line: IndentBreaks ends a line at each.
const lineBreaks = "\r\n\v\f\u0085\u2028\u2029"

// IndentBreaks returns s with every line break ("\r\n", "\r", "\n",
// vertical tab, form feed, NEL, and the Unicode line and paragraph
// separators) replaced by "\n" and indent: s itself when it has none.
//
// Stored text is shown in the memory block under memgate's own layout —
// headings and bullets that start a line. Indenting what stored text puts
// on a new line keeps every line it writes deeper than memgate's own, so
// a message cannot forge a heading, a date or another turn (house rule 25).
func IndentBreaks(s, indent string) string {
	i := strings.IndexAny(s, lineBreaks)
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
		i = strings.IndexAny(s, lineBreaks)
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
