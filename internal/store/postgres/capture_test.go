package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

// The store, erasure and adopt contracts run through SaveExchange, which
// is SaveExchanges' group-commit path (save.go): they check that path too.
func TestCaptureContract(t *testing.T) {
	storetest.RunCapture(t, func(t *testing.T) storetest.CaptureStore { return mustOpen(t) })
}
