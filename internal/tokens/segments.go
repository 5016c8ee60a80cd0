package tokens

import (
	"strings"
	"unicode/utf8"
)

// segmentMinText is the length below which a text is counted whole: a
// shorter one gains nothing from being cut.
const segmentMinText = 512

// segmentCache remembers the token counts of the lines of long multi-line
// texts. The prompt's memory block is such a text: rebuilt on every
// request (and again when it is shrunk to fit), it is mostly the same
// lines — the summary, facts, recalled passages — request after request,
// and counting it whole was a tenth of a memory-on request's CPU.
//
// A text is cut only where the pre-tokenizer itself starts a piece after a
// newline and before a character that is not white space, so its count is
// exactly the sum of its segments' counts: a piece is decided by the text
// from its start up to at most the character after it, and each segment
// starts and ends at a piece boundary of the text being counted. The
// segments' counts are kept in a memo.
type segmentCache struct {
	memo *memo
}

func newSegmentCache(m *memo) *segmentCache {
	return &segmentCache{memo: m}
}

// count returns the number of tokens s encodes to under e: e.count(s),
// summed over s's lines with the lines' counts remembered.
func (c *segmentCache) count(e *encoding, s string) int {
	if len(s) < segmentMinText || !utf8.ValidString(s) || !strings.Contains(s[:len(s)-1], "\n") {
		return e.count(s)
	}
	n, start, cut := 0, 0, false
	for i := 0; i < len(s); {
		j := e.next(s, i)
		if j == len(s) || (s[j-1] == '\n' && !isSpaceByte(s[j])) {
			if j == len(s) && !cut {
				return e.count(s) // one line: nothing to share with other texts
			}
			cut = true
			n += c.segment(e, s, start, j)
			start = j
		}
		i = j
	}
	return n
}

// isSpaceByte reports whether b starts a white-space character or is not
// ASCII (then treated as possibly white space: no cut before it).
func isSpaceByte(b byte) bool {
	return b >= utf8.RuneSelf || b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// segment returns the count of s[from:to], whose ends are piece
// boundaries of s.
func (c *segmentCache) segment(e *encoding, s string, from, to int) int {
	return c.memo.count(c.memo.key(kindSegment, e.name, s[from:to], nil), func() int { return e.countRange(s, from, to) })
}
