package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/store/contract"
)

// defaultChatLockTTL is how long a chat lock lasts unrenewed
// (Store.chatLockTTL): a holder that died (its process killed between the
// lock and its release) loses it then. A live holder renews it every
// third of that while it holds it, however long its store calls take.
const defaultChatLockTTL = time.Minute

// chatLockPoll bounds the wait between two tries at a chat lock another
// holder has.
const chatLockPoll = 20 * time.Millisecond

// LockChats takes the locks of chats (record.ChatLocker): rows of
// chat_locks, all or none in one write transaction, which the processes
// sharing the file run one at a time; while another holder has one, it
// tries again after a short wait (1 ms doubling to 20 ms) until ctx ends.
// Taking all at once, it never holds one while it waits for another.
// While held, the rows are renewed every third of their lease
// (Store.chatLockTTL), so a holder whose store calls outlast the lease keeps
// them; only a holder that cannot renew them for a whole lease (its
// process died or stopped, the file unwritable) loses them. The release
// stops the renewal and deletes the rows; a release that fails leaves
// them to run out. Each hold has a holder token of its own, named by the
// fence returned: the Store's writes under it (memory.Exchange.Fence)
// commit only while its rows still name that token (fenceChats). A
// holder that stalled past its lease, the lock taken since by another
// process or another hold on this Store, stores nothing more under it,
// nor does one whose hold was released.
func (s *Store) LockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), error) {
	keys := contract.ChatKeys(chats)
	if len(keys) == 0 {
		return 0, func() {}, nil
	}
	holder := rand.Text()
	for delay := time.Millisecond; ; delay = min(2*delay, chatLockPoll) {
		took, err := s.tryLockChats(ctx, keys, holder)
		if err != nil {
			return 0, nil, lockErr(ctx, err)
		}
		if took {
			fence, unlock := s.holdChats(keys, holder)
			return fence, unlock, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, nil, fmt.Errorf("sqlite: lock chats: %w", ctx.Err())
		}
	}
}

// TryLockChats takes the locks of chats as LockChats does when no other
// holder has a live one of them, in one write transaction, and reports
// whether it took them; it never waits for another holder. Not taken (ok
// false), it holds nothing.
func (s *Store) TryLockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), ok bool, err error) {
	keys := contract.ChatKeys(chats)
	if len(keys) == 0 {
		return 0, func() {}, true, nil
	}
	holder := rand.Text()
	took, err := s.tryLockChats(ctx, keys, holder)
	if err != nil {
		return 0, nil, false, lockErr(ctx, err)
	}
	if !took {
		return 0, nil, false, nil
	}
	fence, unlock = s.holdChats(keys, holder)
	return fence, unlock, true, nil
}

// lockErr wraps a failed attempt to take chat locks. When ctx ended
// during the attempt, database/sql rolls its transaction back and the
// commit reports only sql.ErrTxDone: the error then wraps ctx's error too,
// so a caller waiting with a deadline sees it (errors.Is) and nothing was
// taken either way.
func lockErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlite: lock chats: %w: %w", cerr, err)
	}
	return fmt.Errorf("sqlite: lock chats: %w", err)
}

// tryLockChats takes the locks of keys for holder when no other holder has
// a live one, and reports whether it took them.
func (s *Store) tryLockChats(ctx context.Context, keys []int64, holder string) (took bool, err error) {
	err = s.inWrite(ctx, func(tx *sql.Tx) error {
		now := nanos(s.chatLockNow())
		for _, k := range keys {
			var expires int64
			err := tx.QueryRowContext(ctx, `SELECT expires_at FROM chat_locks WHERE key = ?`, k).Scan(&expires)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			case expires > now:
				return nil // another holder has it
			}
		}
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, `INSERT INTO chat_locks (key, holder, expires_at) VALUES (?, ?, ?)
				ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at`,
				k, holder, now+int64(s.chatLockTTL)); err != nil {
				return err
			}
		}
		took = true
		return nil
	})
	return took, err
}

// holdChats records holder's hold of keys under a new fence and renews its
// locks every third of their lease until the func it returns, which then
// releases them, is called.
func (s *Store) holdChats(keys []int64, holder string) (memory.Fence, func()) {
	fence := s.holds.Add(keys, holder)
	stop := pace.Keep(context.Background(), s.chatLockTTL/3, func(ctx context.Context) (bool, error) {
		return s.renewChats(ctx, keys, holder)
	}, func(err error) {
		s.logger.Warn("sqlite: cannot renew chat locks; trying again", "err", err)
	}, func() {
		s.logger.Warn("sqlite: chat locks ran out before their renewal; another holder may have them", "lease", s.chatLockTTL)
	})
	return fence, sync.OnceFunc(func() {
		s.holds.Remove(fence) // nothing more is written under it
		stop()                // a renewal under way gives up: the release is next
		s.unlockChats(keys, holder)
	})
}

// fenceChats returns memory.ErrLockLost unless the hold fence names holds
// the locks of chats: recorded on this Store (not released) for them, and
// their rows in chat_locks, read in tx, still name its holder token (else
// the lock ran out unrenewed and another holder, in another process or
// on this Store, took it). A write made in tx under it then rolls back:
// the write transactions of the processes sharing the file run one at a
// time, so a holder whose row still names it stores before any other
// holder takes the chat. A write under no hold (fence zero) is not
// checked: one of no chat, or by a writer without the store's locks
// (record's capture, given them, never stores a chat's turn without
// them).
func (s *Store) fenceChats(ctx context.Context, tx *sql.Tx, fence memory.Fence, chats ...memory.Identity) error {
	if fence == 0 {
		return nil
	}
	for _, k := range contract.ChatKeys(chats) {
		holder, ok := s.holds.Holder(fence, k)
		if !ok {
			return memory.ErrLockLost
		}
		var now string
		err := tx.QueryRowContext(ctx, `SELECT holder FROM chat_locks WHERE key = ?`, k).Scan(&now)
		if errors.Is(err, sql.ErrNoRows) || err == nil && now != holder {
			return memory.ErrLockLost
		}
		if err != nil {
			return fmt.Errorf("check chat lock: %w", err)
		}
	}
	return nil
}

// renewChats extends holder's locks of keys by a lease from now, and
// reports whether holder still had every one of them.
func (s *Store) renewChats(ctx context.Context, keys []int64, holder string) (held bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.chatLockTTL/3)
	defer cancel()
	err = s.inWrite(ctx, func(tx *sql.Tx) error {
		expires := nanos(s.chatLockNow()) + int64(s.chatLockTTL)
		var n int64
		for _, k := range keys {
			res, err := tx.ExecContext(ctx, `UPDATE chat_locks SET expires_at = ? WHERE key = ? AND holder = ?`, expires, k, holder)
			if err != nil {
				return err
			}
			m, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += m
		}
		held = n == int64(len(keys))
		return nil
	})
	return held, err
}

// unlockChats releases holder's locks of keys.
func (s *Store) unlockChats(keys []int64, holder string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, `DELETE FROM chat_locks WHERE key = ? AND holder = ?`, k, holder); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.logger.Warn("sqlite: cannot release chat locks; they run out", "after", s.chatLockTTL, "err", err)
	}
}
