package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.RankingStore = (*sqlite.Store)(nil)

func TestRankingContract(t *testing.T) {
	storetest.RunRanking(t, func(t *testing.T) storetest.RankingStore {
		s, _ := mustTempStore(t)
		return s
	})
}

// TestRankingOnOneReadConnection runs the ranking suite with a read pool of
// one connection: the full-text index and the context reads never query
// while rows hold the connection.
func TestRankingOnOneReadConnection(t *testing.T) {
	storetest.RunRanking(t, func(t *testing.T) storetest.RankingStore {
		s, _ := mustTempStore(t)
		sqlite.SetReadConns(s, 1)
		return s
	})
}

// tooLarge opens a store whose in-memory index keeps no user's vectors or
// text index: every search of a user with items goes the way a user too
// large for the index does.
func tooLarge(t *testing.T) *sqlite.Store {
	s, _ := mustTempStore(t)
	s.SetCacheLimits(itemindex.Limits{Vectors: 1, Texts: 1, Items: 1 << 20, Windows: itemindex.DefaultLimits.Windows})
	return s
}

// TestKnowledgeOfUsersTooLargeForTheIndex runs the knowledge suite on the
// searches of users too large for the index. (The ranking suite states
// the index's BM25 over all of a user's items; SQL ranks a window of the
// newest candidates, see searchTextWindow.)
func TestKnowledgeOfUsersTooLargeForTheIndex(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore { return tooLarge(t) })
}
