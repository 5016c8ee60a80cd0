package sqlitestore_test

import (
	"testing"

	"github.com/memgate/memgate/internal/storetest"
)

func TestCaptureContract(t *testing.T) {
	storetest.RunCapture(t, func(t *testing.T) storetest.CaptureStore {
		s, _ := mustTempStore(t)
		return s
	})
}
