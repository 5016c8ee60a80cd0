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
// its saves take, and loses them only with its connection.
// At most half the pool's connections hold chat locks at once (the saves
// under them need the other half); a pool of one cannot lock.
func (s *Store) LockChats(ctx context.Context, chats []memory.Identity) (unlock func(), err error) {
	var keys []int32
	for _, k := range contract.ChatKeys(chats) {
		keys = append(keys, int32(k^k>>32))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
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
	for _, k := range keys {
		b.Queue(`SELECT pg_advisory_xact_lock($1, $2)`, chatLockClass, k)
	}
	release := func() {
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
	return release, nil
}
