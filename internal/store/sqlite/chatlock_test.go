package sqlite_test

import (
	"context"
	"errors"
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
	const lease = 300 * time.Millisecond
	a, path := mustTempStore(t)
	b := mustOpen(t, path)
	sqlite.SetChatLockTTL(a, lease)
	sqlite.SetChatLockTTL(b, lease)
	x := []memory.Identity{{Tenant: "acme", User: "ana", Conversation: "chat-x"}}
	unlock, err := a.LockChats(context.Background(), x)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*lease)
	defer cancel()
	if got, err := b.LockChats(ctx, x); err == nil {
		got()
		unlock()
		t.Fatal("another handle took a chat whose holder still holds it, once its lease had run")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockChats: %v, want its context's deadline", err)
	}
	unlock()
	ctx, cancel = context.WithTimeout(context.Background(), lease/2)
	defer cancel()
	got, err := b.LockChats(ctx, x)
	if err != nil {
		t.Fatalf("LockChats after the release: %v", err)
	}
	got()
}

// TestChatLockLostLeaseCannotWrite: a holder that stalled past its lease
// (here: the other handle's clock two leases on, so the lease has run for
// it) loses the chat to the other handle, and then cannot store under
// the lock it lost: its save of the chat's first turn, its candidate and
// its adoption are refused with memory.ErrLockLost, nothing of them
// stored, while the new holder stores the turn once.
func TestChatLockLostLeaseCannotWrite(t *testing.T) {
	a, path := mustTempStore(t)
	b := mustOpen(t, path)
	sqlite.SetChatLockClock(b, func() time.Time { return time.Now().Add(2 * time.Minute) })
	ctx := context.Background()
	first := memory.Exchange{ID: "ex-first", Identity: memory.Identity{Tenant: "acme", User: "ana", Conversation: memory.DefaultConversation},
		Candidate: "chat-x", Model: "m", At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "hi"}},
		Reply: memory.Message{Role: "assistant", Content: "hello"}}
	chat, _ := memory.ChatOf(first)
	unlockA, err := a.LockChats(ctx, []memory.Identity{chat})
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	defer unlockA()
	unlockB, err := b.LockChats(ctx, []memory.Identity{chat})
	if err != nil {
		t.Fatalf("LockChats of a lock run out: %v", err)
	}
	defer unlockB()

	if _, err := a.SaveExchange(ctx, first); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("SaveExchange under a lost lock: %v, want memory.ErrLockLost", err)
	}
	if err := a.RecordCandidate(ctx, first.Identity, first.ID, first.Candidate); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("RecordCandidate under a lost lock: %v, want memory.ErrLockLost", err)
	}
	next := first
	next.ID, next.Candidate, next.Derived, next.Conversation = "ex-next", "", true, "chat-x"
	next.Prior = append(first.Turn, first.Reply)
	if _, err := a.Adopt(ctx, next.Identity, "", next.Prior, time.Time{}); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("Adopt under a lost lock: %v, want memory.ErrLockLost", err)
	}
	if msgs, err := b.Recent(ctx, first.Identity, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("after the refused save the default conversation holds %d messages (%v), want none", len(msgs), err)
	}
	res, err := b.SaveExchange(ctx, first)
	if err != nil || res.Inserted != 2 {
		t.Fatalf("the new holder's SaveExchange: inserted %d, %v; want 2", res.Inserted, err)
	}
}
