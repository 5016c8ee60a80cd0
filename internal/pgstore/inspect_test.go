package pgstore

import (
	"testing"

	"github.com/memgate/memgate/internal/storetest"
)

var _ storetest.InspectStore = (*Store)(nil)

func TestInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.InspectStore { return mustOpen(t) })
}
