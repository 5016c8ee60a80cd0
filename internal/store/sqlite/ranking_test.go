package sqlite_test

import (
	"testing"

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
