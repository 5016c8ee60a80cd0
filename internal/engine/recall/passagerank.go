package recall

import (
	"cmp"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// rankPassages orders passages (expand's: each hit shown with the turns
// around it), best first, by their score weighed by how much of query
// they show (mt, the query's matcher): Score × (1 + share) / 2, where share is the part of the
// query's words (memory.QueryTerms, matched as queryMatcher does) found
// anywhere in the passage's text. A hit is ranked on its own turn, but
// shown with its neighbours: in conversation the words of a question and
// of its answer are often in adjacent turns ("What did you paint?" /
// "A sunset, last week"), so of two hits scored alike, the one whose
// passage holds more of what was asked comes first. Scores stay in
// (0, 1]; passages of equal weighed score keep their order. A query
// without words leaves passages as they are.
func rankPassages(passages []memory.Item, mt *queryMatcher) {
	if mt == nil || len(passages) < 2 {
		return
	}
	n := float64(len(mt.terms))
	for i := range passages {
		share := float64(mt.score(passages[i].Text)) / n
		passages[i].Score *= (1 + min(share, 1)) / 2
	}
	slices.SortStableFunc(passages, func(a, b memory.Item) int { return cmp.Compare(b.Score, a.Score) })
}
