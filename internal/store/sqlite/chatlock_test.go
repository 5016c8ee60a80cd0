package sqlite_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.ChatLockStore = (*sqlite.Store)(nil)

// TestChatLockContract runs the chat lock suite on two Stores over one
// file, as two processes open it.
func TestChatLockContract(t *testing.T) {
	storetest.RunChatLocks(t, func(t *testing.T) (storetest.ChatLockStore, storetest.ChatLockStore) {
		s, path := mustTempStore(t)
		return s, mustOpen(t, path)
	})
}

// BenchmarkChatLock measures what the chat lock adds to a full-history
// turn's save (storetest.BenchChatLock).
func BenchmarkChatLock(b *testing.B) {
	s, _ := mustTempStore(b)
	storetest.BenchChatLock(b, s)
}

// TestChatLockHeldPastItsLease: a holder that holds a chat's lock longer
// than its lease (its store calls slow, or retried) keeps it, since the
// lease is renewed while held: another handle on the file cannot take the
// chat until the holder releases it, then takes it at once.
func TestChatLockHeldPastItsLease(t *testing.T) {
	// Renewed every third of it, each renewal bounded by a third: a lease
	// a busy machine's pause of a second or so (a renewal that waits for
	// the CPU, or for the file) does not let run out, which would rightly
	// let the other handle take the chat.
	const lease = 4 * time.Second
	a, path := mustTempStore(t)
	b := mustOpen(t, path)
	sqlite.SetChatLockTTL(a, lease)
	sqlite.SetChatLockTTL(b, lease)
	x := []memory.Identity{{Tenant: "acme", User: "ana", Conversation: "chat-x"}}
	_, unlock, err := a.LockChats(context.Background(), x)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*lease)
	defer cancel()
	if _, got, err := b.LockChats(ctx, x); err == nil {
		got()
		unlock()
		t.Fatal("another handle took a chat whose holder still holds it, once its lease had run")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockChats: %v, want its context's deadline", err)
	}
	unlock()
	ctx, cancel = context.WithTimeout(context.Background(), lease/2)
	defer cancel()
	_, got, err := b.LockChats(ctx, x)
	if err != nil {
		t.Fatalf("LockChats after the release: %v", err)
	}
	got()
}

// TestChatLockLostLeaseCannotWrite runs storetest.RunChatLockLost with a
// holder stalled past its lease: both handles' clocks two leases on, so
// that the lease has run out for either.
func TestChatLockLostLeaseCannotWrite(t *testing.T) {
	a, path := mustTempStore(t)
	b := mustOpen(t, path)
	storetest.RunChatLockLost(t, a, b, stallPastLease(a, b))
}

// stallPastLease returns a lose func for storetest.RunChatLockLost: each
// call moves the clocks of handles two leases on, so that every lock taken
// before has run out for all of them.
func stallPastLease(handles ...*sqlite.Store) func(*testing.T, []memory.Identity) {
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	for _, s := range handles {
		sqlite.SetChatLockClock(s, now)
	}
	return func(*testing.T, []memory.Identity) { ahead.Add(int64(2 * time.Minute)) }
}

// TestChatLockStalledAfterSave runs storetest.RunChatLockStalledAfterSave
// with a holder stalled past its lease.
func TestChatLockStalledAfterSave(t *testing.T) {
	a, path := mustTempStore(t)
	b := mustOpen(t, path)
	storetest.RunChatLockStalledAfterSave(t, a, b, stallPastLease(a, b))
}
