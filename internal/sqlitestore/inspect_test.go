package sqlitestore_test

import (
	"testing"

	"github.com/memgate/memgate/internal/sqlitestore"
	"github.com/memgate/memgate/internal/storetest"
)

var _ storetest.InspectStore = (*sqlitestore.Store)(nil)

func TestInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.InspectStore {
		s, _ := mustTempStore(t)
		return s
	})
}
