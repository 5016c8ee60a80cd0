package sqlitestore_test

import (
	"testing"

	"github.com/memgate/memgate/internal/sqlitestore"
	"github.com/memgate/memgate/internal/storetest"
)

var _ storetest.KnowledgeStore = (*sqlitestore.Store)(nil)

func TestKnowledgeContract(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore {
		s, _ := mustTempStore(t)
		return s
	})
}
