package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.RankingStore = (*Store)(nil)

func TestRankingContract(t *testing.T) {
	storetest.RunRanking(t, func(t *testing.T) storetest.RankingStore { return mustOpen(t) })
}
