package main

import (
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
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
