package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.HeldStore = (*Store)(nil)

func TestHeldContract(t *testing.T) {
	storetest.RunHeld(t, func(t *testing.T) storetest.HeldStore { return mustOpen(t) })
}
