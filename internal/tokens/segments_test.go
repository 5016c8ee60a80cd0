package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// segmentFragments are what the differential test builds lines from:
// words, numbers, contractions, punctuation runs that absorb newlines and
// slashes, white space of every kind, and non-ASCII letters and symbols.
var segmentFragments = []string{
	"the", "The", "QUICK", "brOWN", "fox", " ", "  ", "\t", "\n", "\n\n", " \n", "\r\n", "\n ", "\n\t",
	"-", "- ", "[", "]", "2026-11-25", ",", ".", ".\n", "!\n\n", "/", "//", "/\n", "\n/", "'s", "'LL", "I'm",
	"don't", "123456", "7", "é", "Élan", "straße", "你好", "🙂", "مرحبا", "x", "<memory>", "</memory>",
	"conversation c-1", ":", "…", "\u00a0", "\u2028", "$", "%", "a/b", "—",
}

// randomLine is a line of random fragments ending in a newline.
func randomLine(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(30) {
		b.WriteString(segmentFragments[r.IntN(len(segmentFragments))])
	}
	b.WriteByte('\n')
	return b.String()
}

// TestSegmentCountsMatchWholeCounts counts long multi-line texts through
// the segment cache and whole: the counts must be equal, for texts whose
// lines recur in other texts in another order and next to other lines (so
// most of them are answered from the cache).
func TestSegmentCountsMatchWholeCounts(t *testing.T) {
	encs, err := encodings()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	pool := make([]string, 300)
	for i := range pool {
		pool[i] = randomLine(r)
	}
	for name, e := range encs {
		c := newSegmentCache(newMemo(), &workStats{})
		for i := range 3000 {
			var b strings.Builder
			for b.Len() < segmentMinText+r.IntN(4*segmentMinText) {
				b.WriteString(pool[r.IntN(len(pool))])
			}
			s := b.String()
			if r.IntN(3) == 0 {
				s = strings.TrimRight(s, "\n") // a last line without its newline
			}
			if r.IntN(5) == 0 {
				s = " " + s // a text that starts with white space
			}
			if got, want := c.count(0, e, s), e.count(s); got != want {
				t.Fatalf("%s, text %d: %d tokens by segments, %d whole\n%q", name, i, got, want, s)
			}
		}
		if hits := c.held(); hits == 0 {
			t.Fatalf("%s: no segment remembered", name)
		}
	}
}

// TestSegmentCacheSkipsShortAndOneLineTexts checks texts that gain nothing
// from cutting are counted whole and leave nothing in the cache.
func TestSegmentCacheSkipsShortAndOneLineTexts(t *testing.T) {
	encs, err := encodings()
	if err != nil {
		t.Fatal(err)
	}
	e := encs[O200kBase]
	c := newSegmentCache(newMemo(), &workStats{})
	for _, s := range []string{
		"short\ntext\n",
		strings.Repeat("one long line without a newline ", 40),
		strings.Repeat("one long line ending in one newline ", 40) + "\n",
		strings.Repeat("spaces after every newline\n ", 40),
		string([]byte{0xff, '\n', 'a'}) + strings.Repeat("invalid UTF-8\n", 60),
	} {
		if got, want := c.count(0, e, s), e.count(s); got != want {
			t.Errorf("%.30q: %d tokens, want %d", s, got, want)
		}
	}
	if n := c.held(); n != 0 {
		t.Errorf("%d segments remembered, want none", n)
	}
}

// held is how many segment counts c holds.
func (c *segmentCache) held() int {
	n, _ := memoStats(c.memo)
	return n
}

// TestSegmentCutsArePieceBoundaries checks the byte rule segmentCache cuts
// by against the pre-tokenizer itself: every position it would cut at is
// where a piece starts, in both encodings, on random texts built from
// fragments that stress the rule (newlines before slashes, white space,
// punctuation runs, non-ASCII).
func TestSegmentCutsArePieceBoundaries(t *testing.T) {
	encs, err := encodings()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	cuts := 0
	for name, e := range encs {
		for i := range 2000 {
			var b strings.Builder
			for range 1 + r.IntN(60) {
				b.WriteString(segmentFragments[r.IntN(len(segmentFragments))])
			}
			s := b.String()
			starts := map[int]bool{}
			for p := 0; p < len(s); p = e.next(s, p) {
				starts[p] = true
			}
			for j := 1; j < len(s); j++ {
				if s[j-1] == '\n' && cutBefore(s[j]) {
					cuts++
					if !starts[j] {
						t.Fatalf("%s, text %d: cut at %d is inside a piece: %q | %q", name, i, j, s[:j], s[j:])
					}
				}
			}
		}
	}
	if cuts == 0 {
		t.Fatal("no text had a cut")
	}
}
