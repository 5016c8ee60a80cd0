package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.StateStore = (*Store)(nil)

func TestStateContract(t *testing.T) {
	storetest.RunStates(t, func(t *testing.T) storetest.StateStore { return mustOpen(t) })
}

func BenchmarkStates(b *testing.B) { storetest.BenchStates(b, mustOpen(b)) }
