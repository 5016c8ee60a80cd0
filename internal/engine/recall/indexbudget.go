package recall

import (
	"math"

	"github.com/memgate/memgate/internal/ranking"
)

// exchangeIndexUnits bounds the full-text indexing one exchange (one
// request's turn and reply, or a first request's whole resent history)
// costs, in index units (indexCost): what its messages' chunks add to the
// store's full-text index is what makes indexing cost more than its bytes.
// PostgreSQL keeps BM25 statistics per item and word (a posting, and a
// document frequency per new word): a 2 MiB message of distinct random
// words cost 11–13 CPU-seconds of the server to index, 5 of real English;
// SQLite's FTS5 about a tenth of that. At this bound, indexing such a
// message cost at most about 2.8 CPU-seconds on PostgreSQL and 1.3 on
// SQLite, the encoder's second included (BenchmarkIndexLargeMessage,
// cmd/gateway; 128 Ki units cost up to 3.6 on PostgreSQL). It indexes
// about 550 KB of English in one message, 360 KB of distinct random
// words, the newest 1,150 messages of a resent history of 450-byte ones,
// and every ordinary exchange, a pasted page or a long reply included.
// The rest waits in the store's index backlog, which the enricher's idle
// rounds index, backlogIndexUnits a round (IndexBacklog).
const exchangeIndexUnits = 96 << 10

// exchangeUnits is what one exchange has indexed at once, in index units:
// exchangeIndexUnits, or the Indexer's indexUnits when set (tests that
// need histories past a round, at a scale the race detector runs in
// seconds).
func (ix *Indexer) exchangeUnits() int {
	if ix.indexUnits > 0 {
		return ix.indexUnits
	}
	return exchangeIndexUnits
}

// backlogUnits is what one round of the index backlog indexes: a quarter
// of exchangeUnits (backlogIndexUnits).
func (ix *Indexer) backlogUnits() int {
	return ix.exchangeUnits() * backlogIndexUnits / exchangeIndexUnits
}

// messageIndexFloor is how much of exchangeIndexUnits each message of an
// exchange has first, newest first, before the rest extends them: a huge
// reply does not leave the user's turn unindexed, nor does a huge turn
// its reply. About 50 KB of English.
const messageIndexFloor = 8 << 10

// chunkIndexUnits is what indexCost counts for a chunk besides its words:
// its row and index entries, which a chunk of one long word (a run of
// letters with no space) costs too.
const chunkIndexUnits = 8

// indexCost returns what indexing chunk costs in index units: one a word,
// one more for each distinct word not in seen (a new term of the index,
// which it adds to seen), and chunkIndexUnits.
func indexCost(chunk string, seen map[string]struct{}) int {
	n := chunkIndexUnits
	ranking.ForEachWord([]byte(chunk), func(w []byte) {
		n++
		if _, ok := seen[string(w)]; !ok {
			seen[string(w)] = struct{}{}
			n++
		}
	})
	return n
}

// withinIndexBudget cuts the chunks of msgs (one exchange's messages,
// oldest first) to what budget index units pay for (indexCost), and
// returns how many chunks it left out. Each message keeps a prefix of its
// chunks: first, newest message first, its chunks while they cost at most
// floor; then, newest first again, as many more as the budget left pays
// for. A message's embedded and embeddable counts are cut with its
// chunks. A message cut as it is indexed (cutMessage.rest) is cut on only
// while the budget left could pay for a chunk, so what is cut of it and
// not kept is at most a window's worth.
func withinIndexBudget(msgs []cutMessage, budget, floor int) int {
	seen := map[string]struct{}{}
	kept := make([]int, len(msgs))
	// next[i] is the cost of msgs[i]'s first chunk not kept, once
	// computed (-1 before): it counts its new words once.
	next := make([]int, len(msgs))
	for i := range next {
		next[i] = -1
	}
	// extend keeps msgs[i]'s chunks after the kept ones while its spend,
	// from spent, stays within limit and each fits the budget left.
	extend := func(i, spent, limit int) int {
		m := &msgs[i]
		for kept[i] < len(m.chunks) || budget >= chunkIndexUnits && spent+chunkIndexUnits <= limit && m.cutMore() {
			if next[i] < 0 {
				next[i] = indexCost(m.chunks[kept[i]], seen)
			}
			c := next[i]
			if c > budget || spent+c > limit {
				break
			}
			spent, budget, kept[i], next[i] = spent+c, budget-c, kept[i]+1, -1
		}
		return spent
	}
	spent := make([]int, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		spent[i] = extend(i, 0, floor)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		extend(i, spent[i], math.MaxInt)
	}
	left := 0
	for i := range msgs {
		m := &msgs[i]
		left += len(m.chunks) - kept[i]
		m.chunks = m.chunks[:kept[i]]
		m.embedded, m.embeddable = min(m.embedded, kept[i]), min(m.embeddable, kept[i])
	}
	return left
}
