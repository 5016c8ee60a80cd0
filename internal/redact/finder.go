package redact

import "strings"

// finder yields the occurrences of a few literals in a text, left to right.
// It remembers where each literal occurs next, so that asking again from a
// later position never searches the same bytes twice: finding every
// occurrence costs one pass over the text per literal.
type finder struct {
	s    string
	lits []string
	fold bool // ASCII case-insensitive; the literals are then lower case
	// next[k] is the index of the next occurrence of lits[k] found so far:
	// -2 before the first search, -1 when there is none left.
	next []int
	m    *meter
}

// newFinder returns a finder of lits in s.
func newFinder(s string, lits []string, fold bool, m *meter) *finder {
	next := make([]int, len(lits))
	for k := range next {
		next[k] = -2
	}
	return &finder{s: s, lits: lits, fold: fold, next: next, m: m}
}

// find returns the first occurrence at or after i of any literal, and which
// literal it is; at is -1 when there is none.
func (f *finder) find(i int) (at, k int) {
	at, k = -1, -1
	for j, lit := range f.lits {
		n := f.next[j]
		if n == -2 || n >= 0 && n < i {
			n = -1
			if i <= len(f.s) {
				if x := index(f.s[i:], lit, f.fold); x >= 0 {
					n = i + x
					f.m.add(x + len(lit))
				} else {
					f.m.add(len(f.s) - i)
				}
			}
			f.next[j] = n
		}
		if n >= 0 && (at < 0 || n < at) {
			at, k = n, j
		}
	}
	return at, k
}

// index returns the first index of sub in s, ignoring ASCII case when fold
// is set (sub is then lower case), or -1.
func index(s, sub string, fold bool) int {
	if !fold {
		return strings.Index(s, sub)
	}
	c0, c1 := sub[0], sub[0]
	if c0 >= 'a' && c0 <= 'z' {
		c1 = c0 - 'a' + 'A'
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if (s[i] == c0 || s[i] == c1) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isLetter reports whether c is an ASCII letter.
func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool { return isDigit(c) || isLetter(c) }

// isWordByte reports whether c is an ASCII letter, digit or underscore (a
// regexp \w byte).
func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }

// isSpace reports whether c is ASCII white space.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// runEnd returns the index of the first byte at or after i that in does not
// accept, counting the bytes it passed in m.
func runEnd(s string, i int, in func(byte) bool, m *meter) int {
	j := i
	for j < len(s) && in(s[j]) {
		j++
	}
	m.add(j - i)
	return j
}
