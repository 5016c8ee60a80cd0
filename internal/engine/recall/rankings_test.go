package recall

import (
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// Fuse, Dedup and materialize run Search's fusion and dedup on their own,
// over whole items, for the tests: Search runs them over candidates in a
// Searcher's reused space (searchScratch).

// Fuse merges rankings by reciprocal rank fusion: an item scores the sum
// over the lists it appears in of 1/(60+rank), ranks from 1, divided by the
// best possible score 2/61 so an item first in two lists scores 1. Items are
// the same when kind, ref and chunk are; the first occurrence's fields are
// kept (an embedding from any list is kept). The result is best first.
func Fuse(lists ...[]memory.Item) []memory.Item {
	lists = slices.Clone(lists)
	for i, l := range lists {
		lists[i] = slices.Clone(l) // fuse fills in embeddings
	}
	cands := newSearchScratch().fuse(lists...)
	if cands == nil {
		return nil
	}
	return materialize(cands)
}

// materialize returns the items of cands with their scores.
func materialize(cands []cand) []memory.Item {
	out := make([]memory.Item, len(cands))
	for i, c := range cands {
		out[i] = *c.it
		out[i].Score = c.score
	}
	return out
}

// Dedup walks items in order and keeps each one whose normalised text
// (lower case, punctuation dropped) differs from every kept item's and whose
// embedding has a cosine similarity of at most 0.95 with every kept item's,
// until limit are kept (limit <= 0: no limit). Similarities are those of
// Cosine: the kept set is the one comparing with Cosine would give, only
// found faster (see nearDup).
func Dedup(items []memory.Item, limit int) []memory.Item {
	cands := make([]cand, len(items))
	for i := range items {
		cands[i] = cand{it: &items[i], score: items[i].Score}
	}
	n := len(items)
	if limit > 0 && limit < n {
		n = limit
	}
	return newDedupScratch(n).dedup(cands, limit)
}
