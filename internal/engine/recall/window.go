package recall

import (
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// Bounds of what a passage shows of each turn, in bytes (about a quarter
// as many tokens): a hit turn longer than hitWindowBytes shows the part
// that matched the query with the sentences around it, a neighbouring
// turn longer than maxNeighbourBytes the part that matched (or its start).
// A passage of a long reply and its neighbours then costs a few hundred
// tokens, not a thousand, so the recall share holds more distinct hits.
const (
	hitWindowBytes    = 800
	maxNeighbourBytes = 560
)

// queryMatcher tells which words of a text a query names: a word equal to
// one of the query's terms, or, both at least stemLen letters long,
// starting with the same stemLen letters ("allergic", "allergies"). It
// knows no language's grammar: words are memory.QueryTerms' runs of
// letters, digits and marks.
type queryMatcher struct {
	terms map[string]bool
	stems map[string]bool
}

// stemLen is how many leading letters two long words share to count as
// the same word for a window.
const stemLen = 5

// newQueryMatcher returns the matcher of query's terms (nil when it has none).
func newQueryMatcher(query string) *queryMatcher {
	ts := memory.QueryTerms(query, 64)
	if len(ts) == 0 {
		return nil
	}
	m := &queryMatcher{terms: make(map[string]bool, len(ts)), stems: make(map[string]bool, len(ts))}
	for _, t := range ts {
		m.terms[t] = true
		if st := stemOf(t); st != "" {
			m.stems[st] = true
		}
	}
	return m
}

// score is how many distinct query words s holds: its memory.Words
// (stopwords only when s has no other word, as memory.QueryTerms reads s),
// matched by term or by stem. It allocates nothing for a lower-case text.
func (m *queryMatcher) score(s string) int {
	if m == nil {
		return 0
	}
	var keys, stopKeys []string // distinct matched words or stems
	other := false
	for w := range memory.Words(strings.ToLower(s)) {
		stop := memory.Stopword(w)
		other = other || !stop
		key := w
		if !m.terms[w] {
			if key = stemOf(w); key == "" || !m.stems[key] {
				continue
			}
		}
		if stop && !slices.Contains(stopKeys, key) {
			stopKeys = append(stopKeys, key)
		} else if !stop && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if !other {
		return len(stopKeys)
	}
	return len(keys)
}

// stemOf is w's first stemLen letters, or "" when w is shorter.
func stemOf(w string) string {
	n := 0
	for i := range w {
		if n == stemLen {
			return w[:i]
		}
		n++
	}
	if n == stemLen {
		return w
	}
	return ""
}

// window returns what a passage shows of text within limit bytes: all of
// it when it fits; else the run of whole sentences around the one that
// holds the most query words (the first such; when none does, the text's
// start, or its last sentence with atEnd), grown a sentence at a time
// after then before it while it fits, led by "… " when it starts past the
// text's start. It also reports whether text goes on after the window (the
// caller adds ellipsis). A single sentence over limit is cut at a word.
//
// atEnd is for the turn said right before a passage's hit: what it ended
// with (the question the hit answers, the offer it takes up) is what the
// hit follows on from, its start the furthest from it.
func (m *queryMatcher) window(text string, limit int, atEnd bool) (string, bool) {
	if len(text) <= limit {
		return text, false
	}
	ss := splitSentences(text)
	best, bestScore := 0, 0
	if atEnd {
		best = len(ss) - 1
	}
	if m != nil {
		for i, s := range ss {
			if sc := m.score(s); sc > bestScore {
				best, bestScore = i, sc
			}
		}
	}
	from, to := best, best+1 // ss[from:to]
	size := len(ss[best])
	for grown := true; grown; {
		grown = false
		if to < len(ss) && size+1+len(ss[to]) <= limit {
			size += 1 + len(ss[to])
			to++
			grown = true
		}
		if from > 0 && size+1+len(ss[from-1]) <= limit {
			from--
			size += 1 + len(ss[from])
			grown = true
		}
	}
	kept, cut := clip(strings.Join(ss[from:to], " "), limit)
	if from > 0 {
		kept = "…" + " " + kept
	}
	return kept, cut || to < len(ss)
}
