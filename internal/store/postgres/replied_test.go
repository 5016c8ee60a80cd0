package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.RepliedStore = (*Store)(nil)

func TestRepliedContract(t *testing.T) {
	storetest.RunReplied(t, func(t *testing.T) storetest.RepliedStore { return mustOpen(t) })
}
