package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"testing"
)

// TestLockErrNamesTheEndedContext: an attempt cut off by its context's end
// while committing fails with database/sql's ErrTxDone alone (the
// transaction was rolled back under it); the caller waiting with a deadline
// must still see the deadline (TestChatLockHeldPastItsLease failed so under
// load).
func TestLockErrNamesTheEndedContext(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		err      error
		canceled bool
	}{
		{"ended during the commit", ended, sql.ErrTxDone, true},
		{"ended, its own error", ended, context.Canceled, true},
		{"live context", context.Background(), sql.ErrTxDone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := lockErr(tt.ctx, tt.err)
			if got := errors.Is(err, context.Canceled); got != tt.canceled {
				t.Errorf("lockErr(%v) = %v: is context.Canceled %v, want %v", tt.err, err, got, tt.canceled)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("lockErr(%v) = %v: lost the attempt's error", tt.err, err)
			}
		})
	}
}
