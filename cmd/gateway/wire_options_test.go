package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
)

// TestWorkerOptionsTakeTheCaptureConfig: the capture worker's tunables
// come from capture.*: reclaim_after is its StaleAfter, lock_stuck_after
// its LockStuckAfter (the default 5m when not set).
func TestWorkerOptionsTakeTheCaptureConfig(t *testing.T) {
	cfg := config.Default()
	if got := workerOptions(cfg).LockStuckAfter; got != 5*time.Minute {
		t.Errorf("default LockStuckAfter = %v, want 5m", got)
	}
	cfg.Capture.LockStuckAfter = config.Duration(90 * time.Second)
	cfg.Capture.ReclaimAfter = config.Duration(45 * time.Second)
	o := workerOptions(cfg)
	if o.LockStuckAfter != 90*time.Second {
		t.Errorf("LockStuckAfter = %v, want capture.lock_stuck_after (90s)", o.LockStuckAfter)
	}
	if o.StaleAfter != 45*time.Second {
		t.Errorf("StaleAfter = %v, want capture.reclaim_after (45s)", o.StaleAfter)
	}
}

// TestStoreOpenErrorsServeRefuses: a store that cannot be reached is
// retried (engine.ErrStoreDown); one whose chat locks do not hold on the
// way to PostgreSQL, or whose schema a newer build migrated, is not:
// retrying would not help, and serve refuses it.
func TestStoreOpenErrorsServeRefuses(t *testing.T) {
	for _, tt := range []struct {
		err   error
		retry bool
	}{
		{fmt.Errorf("postgres: connect: %w", memory.ErrUnavailable), true},
		{fmt.Errorf("postgres: %w: a pooler in statement mode", postgres.ErrChatLocksDoNotHold), false},
		{fmt.Errorf("migrate: %w", memory.ErrSchemaTooNew), false},
	} {
		got := storeOpenError(tt.err)
		if errors.Is(got, engine.ErrStoreDown) != tt.retry {
			t.Errorf("storeOpenError(%v) = %v: retried %v, want %v", tt.err, got, !tt.retry, tt.retry)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("storeOpenError(%v) = %v, which lost the cause", tt.err, got)
		}
	}
}
