package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// chatLockClass is the first key of the chat locks' advisory locks. They
// take the two-key form, whose locks never meet the one-key form's (the
// users' locks, userLockSQL): a holder's own save never waits for its
// chat lock.
const chatLockClass int32 = 0x6d67636c // "mgcl"

// LockChats takes the locks of chats (record.ChatLocker): transaction-
// scoped advisory locks, in key order, in a transaction of their own on a
// connection held until the release, which rolls it back (it writes
// nothing). One round trip takes them (BEGIN and the locks, pipelined),
// one releases them. The transaction is exempt from the server's
// idle_in_transaction_session_timeout: a holder keeps them however long
// its saves take, and loses them only with its connection. The Store's
// writes to a chat it holds check, in their transaction, that the lock's
// connection's backend (its pg_backend_pid, read as the lock is taken)
// still holds it (fenceChats), else are refused with
// memory.ErrLockLost: a holder whose lock connection broke, the lock
// taken since by another, stores nothing more under it. The check runs
// at a save's start: a connection that breaks during the save's last
// round trip is not caught.
// At most half the pool's connections hold chat locks at once (the saves
// under them need the other half); a pool of one cannot lock.
func (s *Store) LockChats(ctx context.Context, chats []memory.Identity) (unlock func(), err error) {
	keys := chatLockKeys(chats)
	if len(keys) == 0 {
		return func() {}, nil
	}
	// The saves made under the locks need connections of their own: the
	// locks hold at most half the pool.
	if cap(s.chatLockSlots) == 0 {
		return nil, fmt.Errorf("postgres: lock chats: %w: a pool of %d connection cannot hold a lock and save", memory.ErrUnavailable, s.pool.Config().MaxConns)
	}
	select {
	case s.chatLockSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("postgres: lock chats: %w", ctx.Err())
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		<-s.chatLockSlots
		return nil, fmt.Errorf("postgres: lock chats: acquire: %w", unavailable(err))
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The transaction sits idle while its holder stores: a server that
	// ends such sessions (idle_in_transaction_session_timeout) would end
	// it, and the locks with it, under a slow holder.
	b.Queue("SET LOCAL idle_in_transaction_session_timeout = 0")
	// The fence names the lock's connection by its server backend's pid,
	// read on it: the pid the client was given at connect is a pooler's
	// own behind one (pgbouncer), which no backend has.
	var pid int32
	b.Queue(`SELECT pg_backend_pid()`).QueryRow(func(row pgx.Row) error { return row.Scan(&pid) })
	for _, k := range keys {
		b.Queue(`SELECT pg_advisory_xact_lock($1, $2)`, chatLockClass, k)
	}
	release := func() {
		s.holds.Remove(keys, pid)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A connection still in the transaction (the rollback failed) is
		// closed by the pool on release, and its locks go with it.
		_, _ = conn.Exec(rctx, "ROLLBACK")
		conn.Release()
		<-s.chatLockSlots
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		release()
		if ctx.Err() != nil { // PostgreSQL's cancel is the context's
			err = ctx.Err()
		}
		return nil, fmt.Errorf("postgres: lock chats: %w", unavailable(err))
	}
	// Its holder once granted: while it waited, the fence of a holder of
	// the same keys on this Store (another lane, or a chat whose key is
	// the same) still named that holder's connection.
	s.holds.Add(keys, pid)
	return release, nil
}

// chatLockKeys returns the second keys of chats' advisory locks, distinct
// and in ascending order.
func chatLockKeys(chats []memory.Identity) []int32 {
	var keys []int32
	for _, k := range contract.ChatKeys(chats) {
		keys = append(keys, int32(k^k>>32))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// heldChats returns the chats of chats whose locks the Store holds: their
// keys, and the backend pid of the connection holding each.
func (s *Store) heldChats(chats ...memory.Identity) (keys, pids []int32) {
	for _, k := range chatLockKeys(chats) {
		if pid, ok := s.holds.Holder(k); ok {
			keys, pids = append(keys, k), append(pids, pid)
		}
	}
	return keys, pids
}

// lostChatsSQL counts the locks, of keys $1 held by the backends $2, that
// those backends no longer hold.
const lostChatsSQL = `SELECT count(*) FROM unnest($1::int4[], $2::int4[]) AS x(k, p)
	WHERE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = $3::int4::oid
		AND l.objid = x.k::oid AND l.objsubid = 2 AND l.pid = x.p AND l.granted)`

// fenceChats returns memory.ErrLockLost when the Store took the lock of a
// chat of chats and the connection it took it on no longer holds it (the
// connection broke, and another holder may have taken the chat). A chat
// the Store does not hold is not checked (its store goes on without the
// lock, as when the lock could not be taken).
func (s *Store) fenceChats(ctx context.Context, tx pgx.Tx, chats ...memory.Identity) error {
	keys, pids := s.heldChats(chats...)
	if len(keys) == 0 {
		return nil
	}
	var lost int64
	if err := tx.QueryRow(ctx, lostChatsSQL, keys, pids, chatLockClass).Scan(&lost); err != nil {
		return fmt.Errorf("check chat locks: %w", unavailable(err))
	}
	if lost > 0 {
		return memory.ErrLockLost
	}
	return nil
}
