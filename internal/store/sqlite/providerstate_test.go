package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.StateStore = (*sqlite.Store)(nil)

func TestStateContract(t *testing.T) {
	storetest.RunStates(t, func(t *testing.T) storetest.StateStore {
		s, _ := mustTempStore(t)
		return s
	})
}

func BenchmarkStates(b *testing.B) {
	s, _ := mustTempStore(b)
	storetest.BenchStates(b, s)
}
