package tokens

import (
	"strings"
	"sync/atomic"
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
	work *workStats
}

func newSegmentCache(m *memo, w *workStats) *segmentCache {
	return &segmentCache{memo: m, work: w}
}

// whole returns e.count(s), its work recorded.
func (c *segmentCache) whole(e *encoding, s string) int {
	n, lookups := e.countWork(s)
	c.work.add(len(s), lookups)
	return n
}

// count returns the number of tokens s encodes to under e: e.count(s),
// summed over s's lines with the lines' counts remembered in scope (see
// Counter.Owned).
//
// The cuts are found by looking at bytes, not by running the pre-tokenizer
// over the whole text (which cost as much as the counting it saved): a
// newline followed by an ASCII character that is neither white space nor
// '/' always ends a piece in both encodings. No piece can hold a newline
// and the character after it, except white space after white space and
// the run of newlines and slashes that may end a punctuation piece
// (o200k's " ?[^\s\p{L}\p{N}]+[\r\n/]*"). TestSegmentCutsArePieceBoundaries
// checks every cut against the pre-tokenizer.
func (c *segmentCache) count(scope uint64, e *encoding, s string) int {
	if len(s) < segmentMinText || !utf8.ValidString(s) {
		return c.whole(e, s)
	}
	n, start := 0, 0
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '\n')
		if k < 0 {
			break
		}
		j := i + k + 1
		if j >= len(s) {
			break
		}
		if cutBefore(s[j]) {
			n += c.segment(scope, e, s, start, j)
			start = j
		}
		i = j
	}
	if start == 0 {
		return c.whole(e, s) // one line: nothing to share with other texts
	}
	return n + c.segment(scope, e, s, start, len(s))
}

// cutBefore reports whether a text may be cut after a newline followed by
// b: an ASCII character that is not white space and not '/'.
func cutBefore(b byte) bool {
	return !isSpaceByte(b) && b != '/'
}

// segment returns the count of s[from:to], whose ends are piece
// boundaries of s, remembered in scope.
func (c *segmentCache) segment(scope uint64, e *encoding, s string, from, to int) int {
	return c.memo.count(scope, kindSegment, e, s[from:to], nil, func() int {
		n, lookups := e.countRange(s, from, to)
		c.work.add(to-from, lookups)
		return n
	})
}

// isSpaceByte reports whether b starts a white-space character or is not
// ASCII (then treated as possibly white space: no cut before it).
func isSpaceByte(b byte) bool {
	return b >= utf8.RuneSelf || b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// Work is what a Counter has tokenized since it was made: the texts of at
// least 64 bytes it counted (texts answered from its memo cost nothing,
// and shorter ones, counted without it, are left out to keep them cheap),
// their bytes and the rank lookups of their byte-pair merges. Lookups grow linearly
// with Bytes whatever the text (at most three per byte).
type Work struct {
	Texts, Bytes, Lookups int64
}

// workStats accumulates a Counter's Work.
type workStats struct {
	texts, bytes, lookups atomic.Int64
}

func (w *workStats) add(bytes, lookups int) {
	w.texts.Add(1)
	w.bytes.Add(int64(bytes))
	w.lookups.Add(int64(lookups))
}

func (w *workStats) load() Work {
	return Work{Texts: w.texts.Load(), Bytes: w.bytes.Load(), Lookups: w.lookups.Load()}
}
