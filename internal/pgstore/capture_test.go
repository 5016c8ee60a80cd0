package pgstore

import (
	"testing"

	"github.com/memgate/memgate/internal/storetest"
)

func TestCaptureContract(t *testing.T) {
	storetest.RunCapture(t, func(t *testing.T) storetest.CaptureStore { return mustOpen(t) })
}
