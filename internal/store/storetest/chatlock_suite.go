package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// ChatLockStore is a store that serializes, across the processes sharing
// it, the storing of a full-history chat's first turn and of its
// continuation (record.ChatLocker).
type ChatLockStore interface {
	// LockChats waits until no holder, on this handle or another, holds a
	// lock on any of chats, takes them all and returns the fence the
	// writes under them name (memory.Exchange.Fence) and what releases
	// them; it returns an error, holding nothing, when ctx ends first.
	LockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), err error)
	// TryLockChats takes chats' locks as LockChats does when no holder
	// has one of them, and reports whether it took them, never waiting:
	// not taken, it holds nothing.
	TryLockChats(ctx context.Context, chats []memory.Identity) (fence memory.Fence, unlock func(), ok bool, err error)
}

// RunChatLocks runs the chat lock suite. open must return two handles on
// one fresh database, as two processes sharing it hold them, and register
// their cleanup.
func RunChatLocks(t *testing.T, open func(t *testing.T) (ChatLockStore, ChatLockStore)) {
	t.Helper()
	runPairs(t, open, []pairCase[ChatLockStore]{
		{"HeldAgainstAnotherHandle", testChatLockHeld},
		{"OtherChatsGoOn", testChatLockOtherChats},
		{"OneHolderAtATime", testChatLockExclusive},
		{"OverlappingSetsNeverDeadlock", testChatLockOverlapping},
		{"TryTakesOnlyFreeLocks", testChatLockTry},
	})
}

// chat is a chat's derived conversation, of user.
func chat(user, conv string) memory.Identity {
	return memory.Identity{Tenant: "acme", User: user, Conversation: conv}
}

// mustLockChats takes chats' locks on s, failing the test if it cannot. The
// locks are released by the func it returns, else when the test ends (a
// store may not close while a lock is held).
func mustLockChats(t *testing.T, s ChatLockStore, chats ...memory.Identity) func() {
	t.Helper()
	_, unlock := mustHoldChats(t, s, chats...)
	return unlock
}

// mustHoldChats is mustLockChats that returns the hold's fence too.
func mustHoldChats(t *testing.T, s ChatLockStore, chats ...memory.Identity) (memory.Fence, func()) {
	t.Helper()
	fence, unlock, err := s.LockChats(testCtx(t), chats)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	unlock = sync.OnceFunc(unlock)
	t.Cleanup(unlock)
	return fence, unlock
}

// testChatLockHeld: while one handle holds a chat's lock, another cannot
// take it (its wait ends with its context, in an error); once released,
// the other takes it, and the first takes it again after that.
func testChatLockHeld(t *testing.T, a, b ChatLockStore) {
	x := chat("ana", "chat-x")
	unlock := mustLockChats(t, a, x)
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	_, got, err := b.LockChats(ctx, []memory.Identity{x})
	cancel()
	if err == nil {
		t.Cleanup(got)
		t.Fatal("LockChats took a chat another handle holds")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockChats: %v, want its context's deadline", err)
	}
	unlock()
	mustLockChats(t, b, x)()
	mustLockChats(t, a, x)()
}

// testChatLockOtherChats: a chat's lock holds up no other chat — of the
// same user, or another user's of the same id — and no chat at all locks
// nothing.
func testChatLockOtherChats(t *testing.T, a, b ChatLockStore) {
	unlock := mustLockChats(t, a, chat("ana", "chat-x"))
	defer unlock()
	mustLockChats(t, b, chat("ana", "chat-y"))()
	mustLockChats(t, b, chat("bob", "chat-x"))()
	mustLockChats(t, b)()
}

// testChatLockExclusive: handles racing for one chat hold it one at a
// time: a read-modify-write of a counter under the lock loses no update.
func testChatLockExclusive(t *testing.T, a, b ChatLockStore) {
	const per = 20
	x := chat("ana", "chat-x")
	var (
		counter, inside int
		overlap         atomic.Bool
		busy            atomic.Int32
		wg              sync.WaitGroup
	)
	for _, s := range []ChatLockStore{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				_, unlock, err := s.LockChats(testCtx(t), []memory.Identity{x})
				if err != nil {
					t.Errorf("LockChats: %v", err)
					return
				}
				if busy.Add(1) > 1 {
					overlap.Store(true)
				}
				n := counter
				inside++
				time.Sleep(100 * time.Microsecond)
				counter = n + 1
				busy.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	if overlap.Load() || counter != inside {
		t.Fatalf("holders overlapped (counter %d after %d increments)", counter, inside)
	}
}

// testChatLockOverlapping: handles taking overlapping sets of chats, given
// in either order, all get through.
func testChatLockOverlapping(t *testing.T, a, b ChatLockStore) {
	x, y, z := chat("ana", "chat-x"), chat("ana", "chat-y"), chat("bob", "chat-z")
	sets := [][]memory.Identity{{x, y}, {y, x}, {y, z}, {z, x, y}}
	var wg sync.WaitGroup
	for i, set := range sets {
		s := []ChatLockStore{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_, unlock, err := s.LockChats(testCtx(t), set)
				if err != nil {
					t.Errorf("LockChats: %v", err)
					return
				}
				time.Sleep(100 * time.Microsecond)
				unlock()
			}
		}()
	}
	wg.Wait()
}

// testChatLockTry: TryLockChats takes free chats' locks as LockChats does
// (another handle then cannot take them); while another handle holds one
// of its chats it takes none of them, at once, not even the free ones;
// once that one is released it takes them all.
func testChatLockTry(t *testing.T, a, b ChatLockStore) {
	x, y := chat("ana", "chat-x"), chat("ana", "chat-y")
	unlockX := mustLockChats(t, a, x)
	_, got, ok, err := b.TryLockChats(testCtx(t), []memory.Identity{x, y})
	if err != nil {
		t.Fatalf("TryLockChats: %v", err)
	}
	if ok {
		t.Cleanup(got)
		t.Fatal("TryLockChats took a chat another handle holds")
	}
	// Not taken, it holds none: y is free for a.
	unlockY := mustLockChats(t, a, y)
	unlockY()
	unlockX()
	fence, unlock, ok, err := b.TryLockChats(testCtx(t), []memory.Identity{x, y})
	if err != nil || !ok {
		t.Fatalf("TryLockChats of free chats = %v, %v; want them taken", ok, err)
	}
	t.Cleanup(unlock)
	if fence == 0 {
		t.Error("TryLockChats took the locks under no fence")
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	_, other, err := a.LockChats(ctx, []memory.Identity{y})
	cancel()
	if err == nil {
		other()
		t.Fatal("another handle took a chat TryLockChats holds")
	}
	unlock()
	mustLockChats(t, a, x, y)()
}
