package sqlitestore_test

import (
	"testing"

	"github.com/memgate/memgate/internal/sqlitestore"
	"github.com/memgate/memgate/internal/storetest"
)

var _ storetest.RankingStore = (*sqlitestore.Store)(nil)

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
		sqlitestore.SetReadConns(s, 1)
		return s
	})
}
