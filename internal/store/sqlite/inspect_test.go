package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.InspectStore = (*sqlite.Store)(nil)

func TestInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.InspectStore {
		s, _ := mustTempStore(t)
		return s
	})
}
