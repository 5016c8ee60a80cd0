package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// ErrChatLocksDoNotHold is Open's error when a chat lock taken on one
// connection is not seen held from another (checkChatLocks).
var ErrChatLocksDoNotHold = errors.New("chat locks do not hold on this database path")

// lostFunc counts the locks of keys held by the backends pids (one
// each, in order) that those backends no longer hold, read on a
// connection of its own (Store.lostChats).
type lostFunc func(ctx context.Context, keys, pids []int32) (int64, error)

// lostChats is the lostFunc every fenced write runs (fenceChats), on a
// connection of the pool other than the lock's.
func (s *Store) lostChats(ctx context.Context, keys, pids []int32) (int64, error) {
	var lost int64
	if err := s.pool.QueryRow(ctx, lostChatsSQL, keys, pids, chatLockClass).Scan(&lost); err != nil {
		return 0, fmt.Errorf("check chat locks: %w", unavailable(err))
	}
	return lost, nil
}

// checkChatLocks takes a chat lock on a probe key (TryLockChats: never
// waiting for a real chat's holder) and checks, from another connection,
// as every write under a chat lock does (fenceChats), that the backend
// the lock's transaction named holds it. Behind a pooler that does not
// keep a transaction on one server connection (statement mode), or
// with connections spread over several servers, that check fails, and
// so would every chat turn's save (memory.ErrLockLost): no chat turn
// would ever be stored, each left in the capture queue. Open then fails
// with ErrChatLocksDoNotHold, naming the cause, rather than serve
// while storing no chat turn: the deployment is what needs fixing. A
// pooler in session mode (which migrations need anyway), or in
// transaction mode, keeps the lock's transaction on one backend and
// passes. A probe key a real chat holds at that moment is
// tried again with another key, and after three such tries the check is
// skipped, logged.
func (s *Store) checkChatLocks(ctx context.Context, lost lostFunc) error {
	for range 3 {
		probe := memory.Identity{Tenant: "memgate-probe", User: rand.Text(), Conversation: rand.Text()}
		fence, unlock, ok, err := s.TryLockChats(ctx, []memory.Identity{probe})
		if err != nil {
			if errors.Is(err, memory.ErrUnavailable) {
				return fmt.Errorf("postgres: check chat locks: %w", err)
			}
			return fmt.Errorf("postgres: %w: a chat lock's transaction failed (%w); connect directly, or through a pooler in session mode (pool_mode = session)", ErrChatLocksDoNotHold, err)
		}
		if !ok {
			continue // a real chat's key, held
		}
		keys, pids, _ := s.heldChats(fence, probe)
		n, err := lost(ctx, keys, pids)
		unlock()
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("postgres: %w: a chat lock taken on one connection is not seen held by its backend from another, so every chat turn's save would be refused; "+
				"a pooler in statement mode, or connections spread over several servers: connect to the primary directly, or through a pooler in session mode (pool_mode = session)", ErrChatLocksDoNotHold)
		}
		return nil
	}
	s.logger.Warn("postgres: chat lock check skipped: its probe keys were held")
	return nil
}
