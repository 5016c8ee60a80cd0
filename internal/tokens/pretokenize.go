package tokens

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers below split text exactly as tiktoken's regular
// expressions do (as evaluated by tiktoken-go's backtracking regexp2 engine),
// without a regular expression engine: the pattern is ten times the cost of
// the byte-pair merges that follow it. Each function returns the end (a byte
// offset) of the piece that starts at i < len(s); s must be valid UTF-8.
//
// cl100k_base:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// o200k_base (alternatives joined with |):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	\p{N}{1,3}
//	 ?[^\s\p{L}\p{N}]+[\r\n/]*
//	\s*[\r\n]+
//	\s+(?!\S)
//	\s+
//
// \s is unicode.IsSpace, as in regexp2.
//
// Splitting is linear in the text on any input: each function scans one
// run of a character class and returns its end, or (spaces, upperLower)
// gives back the tail of the run it scanned, which the next call then
// takes whole — so no byte is examined more than a few times. The
// pieces can be as long as the text (240 KB of letters is one piece);
// bpe.go merges long pieces in O(n log n).

// Character classes, as bits.
const (
	clLetter  = 1 << iota // \p{L}
	clNumber              // \p{N}
	clSpace               // \s
	clNewline             // \r or \n
	clUpper               // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	clLower               // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
)

// asciiClass holds the classes of the ASCII characters.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = slowClass(r)
	}
	return t
}()

// slowClass computes the classes of r from the Unicode tables.
func slowClass(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= clLetter
	}
	if unicode.IsNumber(r) {
		c |= clNumber
	}
	if unicode.IsSpace(r) {
		c |= clSpace
	}
	if r == '\r' || r == '\n' {
		c |= clNewline
	}
	mark := unicode.IsMark(r)
	if mark || unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo) {
		c |= clUpper
	}
	if mark || unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo) {
		c |= clLower
	}
	return c
}

// classAt returns the classes of the rune at s[i] and its width; past the end
// it returns 0, 0.
func classAt(s string, i int) (uint8, int) {
	if i >= len(s) {
		return 0, 0
	}
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return slowClass(r), n
}

// isPunct reports [^\s\p{L}\p{N}].
func isPunct(c uint8) bool { return c&(clSpace|clLetter|clNumber) == 0 }

// isPrefix reports [^\r\n\p{L}\p{N}].
func isPrefix(c uint8) bool { return c&(clNewline|clLetter|clNumber) == 0 }

// run returns the end of the run of runes from i that have any class in want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or -1.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return -1
	}
	lower := func(b byte) byte { return b | 0x20 }
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	return -1
}

// numbers returns the end of \p{N}{1,3} at i (whose rune is a number).
func numbers(s string, i int) int {
	for range 3 {
		c, n := classAt(s, i)
		if c&clNumber == 0 {
			break
		}
		i += n
	}
	return i
}

// punct returns the end of ` ?[^\s\p{L}\p{N}]+[\r\n]*` at i (with '/' in
// the trailing set when slash is true), or -1.
func punct(s string, i int, c uint8, slash bool) int {
	if s[i] == ' ' {
		if next, _ := classAt(s, i+1); i+1 < len(s) && isPunct(next) {
			i, c = i+1, next
		}
	}
	if !isPunct(c) {
		return -1
	}
	for i < len(s) {
		c, n := classAt(s, i)
		if !isPunct(c) {
			break
		}
		i += n
	}
	for i < len(s) && (s[i] == '\r' || s[i] == '\n' || slash && s[i] == '/') {
		i++
	}
	return i
}

// spaces handles the three whitespace alternatives at i (whose rune is \s):
// \s*[\r\n]+ , \s+(?!\S) , \s+ .
func spaces(s string, i int) int {
	end, lastNL, last := i, -1, i
	for end < len(s) {
		c, n := classAt(s, end)
		if c&clSpace == 0 {
			break
		}
		if c&clNewline != 0 {
			lastNL = end
		}
		last = end
		end += n
	}
	switch {
	case lastNL >= 0:
		return lastNL + 1
	case end == len(s) || last == i:
		return end
	default:
		return last
	}
}

// nextCL100k returns the end of the cl100k_base piece starting at i.
func nextCL100k(s string, i int) int {
	c, n := classAt(s, i)
	if e := contraction(s, i); e >= 0 {
		return e
	}
	if c&clLetter != 0 {
		return run(s, i, clLetter)
	}
	if isPrefix(c) {
		if next, _ := classAt(s, i+n); next&clLetter != 0 {
			return run(s, i+n, clLetter)
		}
	}
	if c&clNumber != 0 {
		return numbers(s, i)
	}
	if e := punct(s, i, c, false); e >= 0 {
		return e
	}
	return spaces(s, i)
}

// nextO200k returns the end of the o200k_base piece starting at i.
func nextO200k(s string, i int) int {
	c, n := classAt(s, i)
	// The two letter alternatives, each first with the optional prefix.
	if isPrefix(c) {
		if e := upperLower(s, i+n); e >= 0 {
			return withContraction(s, e)
		}
	}
	if e := upperLower(s, i); e >= 0 {
		return withContraction(s, e)
	}
	if isPrefix(c) {
		if next, _ := classAt(s, i+n); next&clUpper != 0 {
			return withContraction(s, upperThenLower(s, i+n))
		}
	}
	if c&clUpper != 0 {
		return withContraction(s, upperThenLower(s, i))
	}
	if c&clNumber != 0 {
		return numbers(s, i)
	}
	if e := punct(s, i, c, true); e >= 0 {
		return e
	}
	return spaces(s, i)
}

// upperLower matches [upper]*[lower]+ at i as a backtracking engine does:
// the upper run is as long as possible while leaving at least one lower
// rune, and the lower run is then as long as possible. It returns -1 when
// nothing matches.
func upperLower(s string, i int) int {
	lastLowerEnd := -1 // end of the last rune of the upper run that is also lower
	j := i
	for j < len(s) {
		c, n := classAt(s, j)
		if c&clUpper == 0 {
			break
		}
		if c&clLower != 0 {
			lastLowerEnd = j + n
		}
		j += n
	}
	if c, _ := classAt(s, j); j < len(s) && c&clLower != 0 {
		return run(s, j, clLower)
	}
	// Backtrack: give the last rune of the upper run that is also lower to
	// the lower run; the rune after it is not lower (or it would have been
	// the last such), so the lower run ends there.
	return lastLowerEnd
}

// upperThenLower matches [upper]+[lower]* at i, whose rune is upper.
func upperThenLower(s string, i int) int {
	return run(s, run(s, i, clUpper), clLower)
}

// withContraction extends a letter piece ending at e by an optional
// contraction.
func withContraction(s string, e int) int {
	if c := contraction(s, e); c >= 0 {
		return c
	}
	return e
}
