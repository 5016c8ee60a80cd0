package sqlite_test

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

func TestCaptureContract(t *testing.T) {
	storetest.RunCapture(t, func(t *testing.T) storetest.CaptureStore {
		s, _ := mustTempStore(t)
		return s
	})
}
