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

func (s *fencedStore) LockChats(ctx context.Context, chats []memory.Identity) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks++
	return func() {}, nil
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

func (s *fencedStore) RecordCandidate(context.Context, memory.Identity, string, string) error {
	return nil
}

func (s *fencedStore) Adopt(context.Context, memory.Identity, string, []memory.Message, time.Time) (int, error) {
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
			if via == "capturer" {
				c := mustCapturer(t, nil, st, nil, Options{Adopter: st, Chats: NewChatLocks(st)})
				c.Capture(context.Background(), first)
				waitFor(t, "the capture done with", func() bool { return value(t, c.metrics.saved)+value(t, c.metrics.deadLetters) > 0 })
				if n := value(t, c.metrics.deadLetters); n != 0 {
					t.Errorf("%v dead letters, want none", n)
				}
			} else {
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
			if got := st.ids(); len(got) != 0 {
				t.Errorf("stored %q after the lock was lost, want nothing: the continuation holds the turn", got)
			}
			if n := st.lockCalls(); n != 2 {
				t.Errorf("LockChats called %d times, want 2: once, and again after the refused save", n)
			}
		})
	}
}

// brokenFenceStore refuses every save made while a chat lock of it is
// held (memory.ErrLockLost), as a store whose fence cannot see its own
// lock does (a PostgreSQL pooler hiding the lock connection's backend);
// without the lock its saves go through.
type brokenFenceStore struct {
	*fakeSaver
	mu          sync.Mutex
	held, locks int
}

func (s *brokenFenceStore) LockChats(ctx context.Context, chats []memory.Identity) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held++
	s.locks++
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.held--
	}), nil
}

func (s *brokenFenceStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	s.mu.Lock()
	held := s.held > 0
	s.mu.Unlock()
	if held {
		return memory.SaveResult{}, memory.ErrLockLost
	}
	return s.fakeSaver.SaveExchange(ctx, ex)
}

func (s *brokenFenceStore) RecordCandidate(context.Context, memory.Identity, string, string) error {
	return nil
}

func (s *brokenFenceStore) Adopt(context.Context, memory.Identity, string, []memory.Message, time.Time) (int, error) {
	return 0, nil
}

func (s *brokenFenceStore) Continued(context.Context, memory.Exchange) (bool, error) {
	return false, nil
}

func (s *brokenFenceStore) lockCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locks
}

// TestLockLostAgainAfterItsRetake: a save refused for a lost chat lock
// again right after the lock was taken again says the store's fence
// cannot see the lock: the Capturer or the Worker stores the turn without
// the store's lock, as when it cannot be taken, once — it does not take
// the lock and save again and again, never storing the turn.
func TestLockLostAgainAfterItsRetake(t *testing.T) {
	for _, via := range []string{"capturer", "worker"} {
		t.Run(via, func(t *testing.T) {
			st := &brokenFenceStore{fakeSaver: newFakeSaver()}
			first := chatTurn(t, "t1", "chat-x")
			first.Conversation = memory.DefaultConversation
			if via == "capturer" {
				c := mustCapturer(t, nil, st, nil, Options{Adopter: st, Chats: NewChatLocks(st)})
				c.Capture(context.Background(), first)
				waitFor(t, "the turn stored", func() bool { return len(st.ids()) > 0 })
			} else {
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
			}
			if got := st.ids(); len(got) != 1 {
				t.Errorf("stored %q, want the turn once", got)
			}
			if n := st.lockCalls(); n != 2 {
				t.Errorf("LockChats called %d times, want 2: once, and again after the first refused save", n)
			}
		})
	}
}
