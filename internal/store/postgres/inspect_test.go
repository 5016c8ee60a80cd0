package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.InspectStore = (*Store)(nil)

func TestInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.InspectStore { return mustOpen(t) })
}
