package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/store/contract"
)

// chatLockClass is the first key of the chat locks' advisory locks. They
// take the two-key form, whose locks never meet the one-key form's (the
// users' locks, userLockSQL): a holder's own save never waits for its
// chat lock.
const chatLockClass int32 = 0x6d67636c // "mgcl"

// chatFenceClass is the first key of the chat fences' advisory locks: a
// write under a chat's lock holds its fence shared, from before its check
// of the hold (fenceChats) to its commit, and a new holder of the chat
// takes it exclusively once, right after its lock is granted: it waits
// for the writes of a holder whose lock connection broke that passed
// their check before, so it reads the chat with them, and those that
// check after find the lock lost.
const chatFenceClass int32 = 0x6d676366 // "mgcf"

// fenceChatsSQL takes, in a write's transaction, before any other lock,
// the fences of the chat lock keys $2, shared, in the order given
// (ascending: fenceKeys), and bounds how long the transaction may sit
// idle to $3 milliseconds (the chat locks' lease): a writer that froze
// holding them keeps the chat's next holder waiting that long at most.
const fenceChatsSQL = `SELECT set_config('idle_in_transaction_session_timeout', $3::text, true),
		pg_advisory_xact_lock_shared($1::int4, x.k)
	FROM unnest($2::int4[]) WITH ORDINALITY AS x(k, o) ORDER BY x.o`

// fenceKeys returns keys distinct and ascending, as fenceChatsSQL takes
// them.
func fenceKeys(keys []int32) []int32 {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// defaultChatLockTTL is how long a chat lock outlives its holder's last
// word (Store.chatLockTTL): its transaction's
// idle_in_transaction_session_timeout, after which the server ends the
// session of a holder that froze (a process stopped, a network cut
// without a reset, which TCP alone may take hours to notice), and the
// lock with it. A live holder speaks on the lock's connection every third
// of that while it holds it, however long its saves take.
const defaultChatLockTTL = time.Minute

// LockChats takes the locks of chats (record.ChatLocker): transaction-
// scoped advisory locks, in key order, in a transaction of their own on a
// connection held until the release, which rolls it back (it writes
// nothing). One round trip takes them (BEGIN and the locks, pipelined),
// one releases them. The transaction sets its own
// idle_in_transaction_session_timeout, the lock's lease
// (Store.chatLockTTL), whatever the server's, and the holder renews it
// while it holds them (a statement on the lock's connection every third
// of it): a holder keeps them however long its saves take, and loses
// them with its connection, or a lease after it froze. Each hold is
// named by the fence returned: the Store's writes under it
// (memory.Exchange.Fence) check, in their transaction, that the hold is
// not released and that its lock connection's backend (its
// pg_backend_pid, read as the lock is taken) still holds the lock
// (fenceChats), else are refused with memory.ErrLockLost: a holder whose
// lock connection broke, the lock taken since by another process or
// another hold on this Store, stores nothing more under it, nor does one
// whose hold was released. The check runs at a write's start, and a
// write that passed it may commit after the lock connection broke; so a
// new holder, once granted, waits for such writes to end
// (chatFenceClass) and reads the chat with them.
// At most half the pool's connections hold chat locks at once (the saves
// under them need the other half); a pool of one cannot lock.
func (s *Store) LockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), error) {
	fence, unlock, _, err := s.lockChats(ctx, chats, false)
	return fence, unlock, err
}

// TryLockChats takes the locks of chats as LockChats does when no other
// holder has one of them (nor a write of a lost hold of them is under
// way), in the same one round trip, and reports whether it took them; it
// never waits for another holder. Not taken (ok false), it holds nothing.
func (s *Store) TryLockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), ok bool, err error) {
	return s.lockChats(ctx, chats, true)
}

// lockChats is LockChats, or with try TryLockChats.
func (s *Store) lockChats(ctx context.Context, chats []memory.Identity, try bool) (memory.Fence, func(), bool, error) {
	keys := chatLockKeys(chats)
	if len(keys) == 0 {
		return 0, func() {}, true, nil
	}
	// The saves made under the locks need connections of their own: the
	// locks hold at most half the pool.
	if cap(s.chatLockSlots) == 0 {
		return 0, nil, false, fmt.Errorf("postgres: lock chats: %w: a pool of %d connection cannot hold a lock and save", memory.ErrUnavailable, s.pool.Config().MaxConns)
	}
	select {
	case s.chatLockSlots <- struct{}{}:
	case <-ctx.Done():
		return 0, nil, false, fmt.Errorf("postgres: lock chats: %w", ctx.Err())
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		<-s.chatLockSlots
		return 0, nil, false, fmt.Errorf("postgres: lock chats: acquire: %w", unavailable(err))
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The transaction sits idle while its holder stores: the server ends
	// it, and the locks with it, once it has been idle a lease, renewed
	// by the holder meanwhile (keepChats); the server's own setting, a
	// shorter one say, is not the lease.
	b.Queue("SET LOCAL idle_in_transaction_session_timeout = " + s.fenceIdle())
	// The fence names the lock's connection by its server backend's pid,
	// read on it: the pid the client was given at connect is a pooler's
	// own behind one (pgbouncer), which no backend has.
	var pid int32
	b.Queue(`SELECT pg_backend_pid()`).QueryRow(func(row pgx.Row) error { return row.Scan(&pid) })
	// Tried, a lock another holder has is not waited for: its take
	// reports false, and the transaction's rollback lets go of the
	// others.
	took := true
	tried := func(row pgx.Row) error {
		var ok bool
		err := row.Scan(&ok)
		took = took && ok
		return err
	}
	for _, k := range keys {
		if try {
			b.Queue(`SELECT pg_try_advisory_xact_lock($1, $2)`, chatLockClass, k).QueryRow(tried)
		} else {
			b.Queue(`SELECT pg_advisory_xact_lock($1, $2)`, chatLockClass, k)
		}
	}
	// Granted, wait for the writes still under way under a lost hold of
	// the chats (chatFenceClass): a session lock each, taken and let go.
	for _, k := range keys {
		if try {
			b.Queue(`SELECT pg_try_advisory_lock($1, $2)`, chatFenceClass, k).QueryRow(tried)
		} else {
			b.Queue(`SELECT pg_advisory_lock($1, $2)`, chatFenceClass, k)
		}
	}
	// Only the session's locks go: the transaction's stay.
	b.Queue(`SELECT pg_advisory_unlock_all()`)
	var (
		fence memory.Fence // set once granted
		stop  = func() {}  // the renewals, once granted
	)
	release := func() {
		s.holds.Remove(fence) // nothing more is written under it
		stop()                // a renewal under way gives up: the rollback is next
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A connection still in the transaction (the rollback failed) is
		// closed by the pool on release, and its locks go with it.
		_, _ = conn.Exec(rctx, "ROLLBACK")
		conn.Release()
		<-s.chatLockSlots
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		// A session lock may be left on it: the connection goes.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Conn().Close(cctx)
		cancel()
		release()
		if ctx.Err() != nil { // PostgreSQL's cancel is the context's
			err = ctx.Err()
		}
		return 0, nil, false, fmt.Errorf("postgres: lock chats: %w", unavailable(err))
	}
	if !took {
		release()
		return 0, nil, false, nil
	}
	fence = s.holds.Add(keys, pid)
	stop = s.keepChats(conn)
	return fence, sync.OnceFunc(release), true, nil
}

// keepChats renews the lease of the chat locks held on conn
// (LockChats), a statement every third of it, until the func it returns
// is called. A renewal that fails is logged and tried again; the lock
// may then run out, and the holder's writes under it are refused
// (fenceChats).
func (s *Store) keepChats(conn *pgxpool.Conn) (stop func()) {
	return pace.Keep(context.Background(), s.chatLockTTL/3, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, s.chatLockTTL/3)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			if conn.Conn().IsClosed() {
				return false, nil
			}
			return true, err
		}
		return true, nil
	}, func(err error) {
		s.logger.Warn("postgres: cannot renew chat locks; trying again", "err", err)
	}, func() {
		s.logger.Warn("postgres: chat locks lost with their connection; another holder may have them")
	})
}

// fenceIdle is fenceChatsSQL's bound on a fenced write's idle
// transaction: the chat locks' lease, in milliseconds.
func (s *Store) fenceIdle() string {
	return fmt.Sprint(s.chatLockTTL.Milliseconds())
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

// heldChats returns the lock keys of chats and the backend pid of the
// connection the hold fence names holds each on. ok is false when that
// hold is released, or does not cover one of them: a write under it is
// refused (memory.ErrLockLost). A zero fence names no hold: no keys, ok.
func (s *Store) heldChats(fence memory.Fence, chats ...memory.Identity) (keys, pids []int32, ok bool) {
	if fence == 0 {
		return nil, nil, true
	}
	for _, k := range chatLockKeys(chats) {
		pid, held := s.holds.Holder(fence, k)
		if !held {
			return nil, nil, false
		}
		keys, pids = append(keys, k), append(pids, pid)
	}
	return keys, pids, true
}

// lostChatsSQL counts the locks, of keys $1 held by the backends $2, that
// those backends no longer hold.
const lostChatsSQL = `SELECT count(*) FROM unnest($1::int4[], $2::int4[]) AS x(k, p)
	WHERE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = $3::int4::oid
		AND l.objid = x.k::oid AND l.objsubid = 2 AND l.pid = x.p AND l.granted)`

// fenceChats returns memory.ErrLockLost unless the hold fence names holds
// the locks of chats: recorded on this Store (not released) for them,
// and the connection it took them on still holding them, read in tx (else
// the connection broke, and another holder may have taken the chat). A
// write under no hold (fence zero) is not checked: one of no chat, or by
// a writer without the store's locks (record's capture, given them,
// never stores a chat's turn without them).
func (s *Store) fenceChats(ctx context.Context, tx pgx.Tx, fence memory.Fence, chats ...memory.Identity) error {
	keys, pids, ok := s.heldChats(fence, chats...)
	if !ok {
		return memory.ErrLockLost
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, fenceChatsSQL, chatFenceClass, fenceKeys(keys), s.fenceIdle()); err != nil {
		return fmt.Errorf("fence chat locks: %w", unavailable(err))
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
