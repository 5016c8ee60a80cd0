package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.RepliedStore = (*sqlite.Store)(nil)

func TestRepliedContract(t *testing.T) {
	storetest.RunReplied(t, func(t *testing.T) storetest.RepliedStore {
		s, _ := mustTempStore(t)
		return s
	})
}
