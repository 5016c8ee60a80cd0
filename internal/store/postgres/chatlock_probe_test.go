package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// TestChatLockCheckPasses: on a direct connection, and behind a pooler
// that gives its clients pids of its own (as pgbouncer does; it keeps a
// transaction on one server connection), a chat lock taken on one
// connection is seen held from another: the check at Open passes, and
// leaves no lock held.
func TestChatLockCheckPasses(t *testing.T) {
	url := testenv.PostgresURL(t)
	for name, s := range map[string]*Store{"direct": mustOpenURL(t, url), "pooler": openPooled(t, url)} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			if err := s.checkChatLocks(ctx, s.lostChats); err != nil {
				t.Fatalf("checkChatLocks: %v", err)
			}
			var held int
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid
				AND pid = ANY (SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid())`, chatLockClass).Scan(&held); err != nil {
				t.Fatal(err)
			}
			if held != 0 {
				t.Errorf("%d chat locks held after the check, want none", held)
			}
		})
	}
}

// TestChatLockCheckRefusesASplitPath: when, read from another connection,
// the backend that took the probe's lock is not seen holding it (a pooler
// in statement mode, connections spread over several servers: here the
// check reads another backend's locks), the check fails with
// ErrChatLocksDoNotHold naming a pooler; a failed read is the database
// unavailable, not that.
func TestChatLockCheckRefusesASplitPath(t *testing.T) {
	s := mustOpenURL(t, testenv.PostgresURL(t))
	ctx := testCtx(t)
	elsewhere := func(ctx context.Context, keys, pids []int32) (int64, error) {
		other := make([]int32, len(pids))
		for i, p := range pids {
			other[i] = p + 1 // another backend, as on another server
		}
		return s.lostChats(ctx, keys, other)
	}
	err := s.checkChatLocks(ctx, elsewhere)
	if !errors.Is(err, ErrChatLocksDoNotHold) {
		t.Fatalf("checkChatLocks = %v, want ErrChatLocksDoNotHold", err)
	}
	for _, want := range []string{"pooler", "statement mode"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	down := func(context.Context, []int32, []int32) (int64, error) {
		return 0, fmt.Errorf("check chat locks: %w", memory.ErrUnavailable)
	}
	if err := s.checkChatLocks(ctx, down); !errors.Is(err, memory.ErrUnavailable) || errors.Is(err, ErrChatLocksDoNotHold) {
		t.Fatalf("checkChatLocks with the read failing = %v, want ErrUnavailable only", err)
	}
}
