package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.HeldStore = (*sqlite.Store)(nil)

func TestHeldContract(t *testing.T) {
	storetest.RunHeld(t, func(t *testing.T) storetest.HeldStore {
		s, _ := mustTempStore(t)
		return s
	})
}
