package record

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// fencedStore is a store whose chat lock its holder loses once: the first
// save of a chat's first turn is refused (memory.ErrLockLost, as a store
// refuses a write under a lock that ran out), and meanwhile another
// process, holding the lock since, stored the chat's continuation with
// that first turn as its history (Continued reports it stored ahead).
type fencedStore struct {
	*fakeSaver
	mu        sync.Mutex
	locks     int // LockChats calls
	refused   bool
	continued bool
}

func (s *fencedStore) LockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks++
	return memory.Fence(s.locks), func() {}, nil
}

// TryLockChats takes the locks as LockChats does: nobody else holds them.
func (s *fencedStore) TryLockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), bool, error) {
	fence, unlock, err := s.LockChats(ctx, chats)
	return fence, unlock, err == nil, err
}

func (s *fencedStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	s.mu.Lock()
	if !s.refused {
		s.refused, s.continued = true, true
		s.mu.Unlock()
		return memory.SaveResult{}, memory.ErrLockLost
	}
	s.mu.Unlock()
	return s.fakeSaver.SaveExchange(ctx, ex)
}

func (s *fencedStore) Adopt(context.Context, memory.Identity, string, []memory.Message, time.Time, memory.Fence) (int, error) {
	return 0, nil
}

func (s *fencedStore) Continued(context.Context, memory.Exchange) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.continued, nil
}

func (s *fencedStore) lockCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locks
}

// TestLockLostBeforeTheSave: a Capturer or a Worker whose save of a
// chat's first turn is refused because it lost the chat's lock (stalled
// past its lease) takes the lock again and checks again before storing:
// the continuation another process stored meanwhile holds the turn, so it
// is a duplicate, never stored a second time in the default conversation,
// nor set aside as a dead letter.
func TestLockLostBeforeTheSave(t *testing.T) {
	for _, via := range []string{"capturer", "worker"} {
		t.Run(via, func(t *testing.T) {
			st := &fencedStore{fakeSaver: newFakeSaver()}
			first := chatTurn(t, "t1", "chat-x")
			first.Conversation = memory.DefaultConversation
			storeFirstTurn(t, via, st, first)
			if got := st.ids(); len(got) != 0 {
				t.Errorf("stored %q, want it not stored: the continuation holds the turn", got)
			}
			if n := st.lockCalls(); n != 2 {
				t.Errorf("LockChats called %d times, want 2: once, and again after the first refused save", n)
			}
		})
	}
}

// brokenFenceStore refuses the saves made while a chat lock of it is
// held (memory.ErrLockLost), the first refuse of them, as a store whose
// fence cannot see its own lock for a while does (a PostgreSQL pooler
// hiding the lock connection's backend); without the lock its saves go
// through.
type brokenFenceStore struct {
	*fencedStore
	held    int // locks taken and not released
	refuse  int // saves under a lock still to refuse
	unfence int // saves made without a lock
}

func (s *brokenFenceStore) LockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), error) {
	fence, _, err := s.fencedStore.LockChats(ctx, chats)
	if err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held++
	return fence, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.held--
	}), nil
}

// TryLockChats takes the locks as LockChats does: nobody else holds them.
func (s *brokenFenceStore) TryLockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), bool, error) {
	fence, unlock, err := s.LockChats(ctx, chats)
	return fence, unlock, err == nil, err
}

func (s *brokenFenceStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	s.mu.Lock()
	held := s.held > 0
	if !held {
		s.unfence++
	}
	refuse := held && s.refuse > 0
	if refuse {
		s.refuse--
	}
	s.mu.Unlock()
	if refuse {
		return memory.SaveResult{}, memory.ErrLockLost
	}
	return s.fakeSaver.SaveExchange(ctx, ex)
}

// TestLockLostAgainAfterItsRetake: a save refused for a lost chat lock
// again right after the lock was taken again (the store's fence cannot
// see the lock for a while) is a failed save: the Capturer or the Worker
// takes the lock again and saves again later, with backoff, under it —
// it never stores the turn without the lock, and stores it once when the
// store lets it.
func TestLockLostAgainAfterItsRetake(t *testing.T) {
	const refused = 4
	for _, via := range []string{"capturer", "worker"} {
		t.Run(via, func(t *testing.T) {
			st := &brokenFenceStore{fencedStore: &fencedStore{fakeSaver: newFakeSaver()}, refuse: refused}
			first := chatTurn(t, "t1", "chat-x")
			first.Conversation = memory.DefaultConversation
			storeFirstTurn(t, via, st, first)
			if got := st.ids(); len(got) != 1 {
				t.Errorf("stored %q, want it once", got)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			if st.unfence != 0 {
				t.Errorf("%d saves without the chat's lock, want none", st.unfence)
			}
			if st.locks != refused+1 {
				t.Errorf("LockChats called %d times, want %d: once, and again after each refused save", st.locks, refused+1)
			}
		})
	}
}

// lockingStore is a store a Capturer or a Worker saves to, adopts in and
// locks chats of.
type lockingStore interface {
	Saver
	Adopter
	ChatLocker
}

// storeFirstTurn has a Capturer or a Worker (via) store first in st, with
// st's chat locks, and waits until it is done with it: stored, found
// stored ahead, or acknowledged; none set aside as a dead letter.
func storeFirstTurn(t *testing.T, via string, st lockingStore, first memory.Exchange) {
	t.Helper()
	if via == "capturer" {
		c := mustCapturer(t, nil, st, nil, Options{Adopter: st, Chats: NewChatLocks(st)})
		c.Capture(context.Background(), first)
		waitFor(t, "the capture done with", func() bool { return value(t, c.metrics.saved)+value(t, c.metrics.deadLetters) > 0 })
		if n := value(t, c.metrics.deadLetters); n != 0 {
			t.Errorf("%v dead letters, want none", n)
		}
		return
	}
	q := newFakeQueue()
	enqueue(t, q, first)
	o := fastWorker()
	o.Adopter, o.Chats = st, NewChatLocks(st)
	w := NewWorker(q, st, nil, o)
	mustRunWorker(t, w)
	waitFor(t, "the entry acknowledged", func() bool {
		n, err := q.Pending(context.Background())
		return err == nil && n == 0
	})
	if n := value(t, w.dead); n != 0 {
		t.Errorf("%v dead letters, want none", n)
	}
}
