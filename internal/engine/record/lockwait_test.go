package record

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/pace"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// flakyLocks is a store's ChatLocker whose first fails takes fail, as a
// lock store that is away or times out, before it takes the store's
// locks again.
type flakyLocks struct {
	ChatLocker
	mu           sync.Mutex
	fails, calls int
}

func (l *flakyLocks) LockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), error) {
	l.mu.Lock()
	l.calls++
	fail := l.calls <= l.fails
	l.mu.Unlock()
	if fail {
		return 0, nil, fmt.Errorf("lock chats: %w", memory.ErrUnavailable)
	}
	return l.ChatLocker.LockChats(ctx, chats)
}

// TryLockChats fails as LockChats does while takes are to fail (the lock
// store away), each try counted as a take.
func (l *flakyLocks) TryLockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), bool, error) {
	l.mu.Lock()
	l.calls++
	fail := l.calls <= l.fails
	l.mu.Unlock()
	if fail {
		return 0, nil, false, fmt.Errorf("lock chats: %w", memory.ErrUnavailable)
	}
	return l.ChatLocker.TryLockChats(ctx, chats)
}

// count is how many takes were asked for.
func (l *flakyLocks) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// durableQueue is a capture queue several gateways share, as the gateway
// wires it: the SQLite outbox, a Redis stream.
type durableQueue interface {
	Queue
	SharedQueue
	Leaser
}

// captureQueue returns the capture queue of a gateway on s: the SQLite
// file's outbox, else a Redis stream.
func captureQueue(t *testing.T, s sharedStore) durableQueue {
	t.Helper()
	if st, ok := s.(*sqlite.Store); ok {
		return st.Outbox()
	}
	q, _ := mustRedisQueue(t, testenv.RedisPrefix(t))
	return q
}

// chatOf returns a full-history chat of user in conversation conv: its
// first turn (stored in the default conversation, conv its candidate)
// and the two turns that continue it, each resending the history before
// it.
func chatOf(t *testing.T, user, conv string) (first, next, third memory.Exchange) {
	first = chatTurn(t, "t1", conv)
	first.User, first.Conversation = user, memory.DefaultConversation
	next = exchange(t, NewExchangeID(), "plan a trip", "A2")
	next.User, next.Conversation, next.Derived = user, conv, true
	next.Prior = append(slices.Clone(first.Turn), first.Reply)
	third = exchange(t, NewExchangeID(), "and back?", "A3")
	third.User, third.Conversation, third.Derived = user, conv, true
	third.Prior = append(append(slices.Clone(next.Prior), next.Turn...), next.Reply)
	return first, next, third
}

// TestChatTurnWaitsForItsLock: one gateway stores a chat's first turn
// and stops in its save, holding the chat's lock; meanwhile another
// gateway's lock store fails (away, or timing out) while it stores the
// chat's next two turns. Those turns are not stored without the lock —
// stored then, the continuation would miss the first turn, not yet
// stored, and store it again as its history — but wait in the capture
// queue (or, without one, are retried in place) and are stored under the
// lock once it can be taken, the first turn adopted. Every turn is stored
// once, in order, in the chat's conversation.
func TestChatTurnWaitsForItsLock(t *testing.T) {
	const fails = 3
	for name, open := range sharedStores() {
		for _, queued := range []bool{true, false} {
			if name == "sqlite" && !queued {
				continue // a SQLite gateway always has its outbox
			}
			t.Run(fmt.Sprintf("%s/capture queue %v", name, queued), func(t *testing.T) {
				s1, s2 := open(t)
				user := "ana-" + NewExchangeID()
				first, next, third := chatOf(t, user, "chat-x")

				// Gateway 1's Worker stores the first turn and stops in its
				// save, the chat's lock held.
				held := &heldFirstTurn{Saver: s1, id: first.ID, reached: make(chan struct{}), release: make(chan struct{})}
				q1 := newFakeQueue()
				enqueue(t, q1, first)
				o1 := workerWithStore(fastWorker(), s1)
				o1.Chats = NewChatLocks(s1)
				mustRunWorker(t, NewWorker(q1, held, nil, o1))
				waitLong(t, "gateway 1 storing the first turn", func() bool { return closed(held.reached) })

				// Gateway 2, its lock store failing.
				locks := &flakyLocks{ChatLocker: s2, fails: fails}
				chats := NewChatLocks(locks)
				opts := withStore(Options{Chats: chats, RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}, s2)
				var q durableQueue
				if queued {
					q = captureQueue(t, s2)
					opts.Shared = q
					o2 := workerWithStore(fastWorker(), s2)
					o2.Chats, o2.Lease = chats, q
					mustRunWorker(t, NewWorker(q, s2, nil, o2))
				}
				var c *Capturer
				if q != nil {
					c = mustCapturer(t, q, s2, nil, opts)
				} else {
					c = mustCapturer(t, nil, s2, nil, opts)
				}
				var wg sync.WaitGroup
				wg.Go(func() { c.Capture(context.Background(), next) })
				waitLong(t, "the continuation queued, retried or stored", func() bool {
					return value(t, c.metrics.queued)+value(t, c.metrics.saved) > 0 || locks.count() > 1
				})
				wg.Go(func() { c.Capture(context.Background(), third) })
				waitLong(t, "the lock store's failures over, or the turns stored", func() bool {
					return locks.count() > fails || value(t, c.metrics.saved) >= 2
				})

				close(held.release)
				wg.Wait()
				waitLong(t, "gateway 1's queue drained", func() bool { return pending(t, q1) == 0 })
				waitLong(t, "gateway 2's turns stored", func() bool {
					if q == nil {
						return value(t, c.metrics.saved) >= 2
					}
					n, err := q.Pending(context.Background())
					return err == nil && n == 0
				})
				if got := texts(t, s1, first.Identity); len(got) != 0 {
					t.Errorf("the default conversation holds %q, want nothing: the first turn stored twice", got)
				}
				want := []string{"hi", "hello", "plan a trip", "A2", "and back?", "A3"}
				if got := texts(t, s1, next.Identity); !slices.Equal(got, want) {
					t.Errorf("the chat's conversation holds %q, want %q: each turn once, in order", got, want)
				}
				if n := value(t, c.metrics.deadLetters); n != 0 {
					t.Errorf("%v dead letters, want none", n)
				}
			})
		}
	}
}

// failingChecks is a store whose first adoptions and first checks for a
// first turn stored ahead (Adopt, Continued) fail, as when the store is
// away for a moment.
type failingChecks struct {
	sharedStore
	mu                 sync.Mutex
	adoptFails, adopts int
	checkFails, checks int
	adoptTakes         time.Duration // how long each Adopt takes (a loaded store)
}

func (s *failingChecks) Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error) {
	s.mu.Lock()
	s.adopts++
	fail, takes := s.adopts <= s.adoptFails, s.adoptTakes
	s.mu.Unlock()
	if fail {
		return 0, fmt.Errorf("adopt: %w", memory.ErrUnavailable)
	}
	if takes > 0 && !pace.Sleep(ctx, takes) {
		return 0, fmt.Errorf("adopt: %w", ctx.Err())
	}
	return s.sharedStore.Adopt(ctx, to, candidate, prior, received, fence)
}

func (s *failingChecks) Continued(ctx context.Context, ex memory.Exchange) (bool, error) {
	s.mu.Lock()
	s.checks++
	fail := s.checks <= s.checkFails
	s.mu.Unlock()
	if fail {
		return false, fmt.Errorf("continued: %w", memory.ErrUnavailable)
	}
	return s.sharedStore.Continued(ctx, ex)
}

// TestFailedAdoptionIsAFailedSave: a chat's continuation whose adoption
// of the chat's first turn fails is not stored — stored, it would hold
// the first turn as its history while the default conversation still
// holds it too — but handled as a failed save: queued, and stored under
// the chat's lock once the adoption goes through. Likewise a first turn
// whose check for its continuation stored ahead fails. Either way the
// first turn is stored once, in the chat's conversation.
func TestFailedAdoptionIsAFailedSave(t *testing.T) {
	const fails = 4 // the Capturer's tries, and one of the Worker's
	for name, open := range sharedStores() {
		for _, order := range []string{"adoption fails", "check fails"} {
			t.Run(name+"/"+order, func(t *testing.T) {
				st, _ := open(t)
				fs := &failingChecks{sharedStore: st}
				chats := NewChatLocks(st)
				q := captureQueue(t, st)
				o := workerWithStore(fastWorker(), fs)
				o.Chats, o.Lease = chats, q
				mustRunWorker(t, NewWorker(q, fs, nil, o))
				c := mustCapturer(t, q, fs, nil, withStore(Options{Chats: chats, Shared: q}, fs))

				user := "bea-" + NewExchangeID()
				first, next, _ := chatOf(t, user, "chat-y")
				exs := []memory.Exchange{first, next}
				if order == "adoption fails" {
					c.Capture(context.Background(), first)
					fs.mu.Lock()
					fs.adoptFails = fails
					fs.mu.Unlock()
				} else {
					// The continuation overtook the first turn: it stored
					// it as its history.
					exs = []memory.Exchange{next, first}
					c.Capture(context.Background(), next)
					fs.mu.Lock()
					fs.checkFails = fails
					fs.mu.Unlock()
				}
				c.Capture(context.Background(), exs[1])
				waitLong(t, "the capture queue drained", func() bool {
					n, err := q.Pending(context.Background())
					return err == nil && n == 0
				})
				if got := texts(t, st, first.Identity); len(got) != 0 {
					t.Errorf("the default conversation holds %q, want nothing: the first turn stored twice", got)
				}
				want := []string{"hi", "hello", "plan a trip", "A2"}
				if got := texts(t, st, next.Identity); !slices.Equal(got, want) {
					t.Errorf("the chat's conversation holds %q, want %q: each turn once", got, want)
				}
				if n := value(t, c.metrics.deadLetters); n != 0 {
					t.Errorf("%v dead letters, want none", n)
				}
			})
		}
	}
}

// TestWorkerAdoptionOutlastsALockWait: the Worker's adoption of a chat's
// first turns is bounded by its context, as its save is, not by one wait
// for the chat's lock. An adoption that takes longer than that wait (many
// first turns moved on a loaded store) went on failing at that deadline,
// its entry retried for ever at the head of the queue; it is stored,
// once, after its adoption.
func TestWorkerAdoptionOutlastsALockWait(t *testing.T) {
	st, _ := sharedStores()["sqlite"](t)
	fs := &failingChecks{sharedStore: st}
	q := captureQueue(t, st)
	o := workerWithStore(fastWorker(), fs)
	o.Chats, o.Lease = NewChatLocks(st), q
	w := NewWorker(q, fs, nil, o)
	mustRunWorker(t, w)

	user := "ida-" + NewExchangeID()
	first, next, _ := chatOf(t, user, "chat-z")
	enqueue(t, q, first)
	waitLong(t, "the first turn stored", func() bool { return len(texts(t, st, first.Identity)) > 0 })
	fs.mu.Lock()
	fs.adoptTakes = w.lockWait() + time.Second // past the wait, whatever the machine's pace
	fs.mu.Unlock()
	enqueue(t, q, next)
	waitLong(t, "the continuation stored after its adoption", func() bool {
		return slices.Equal(texts(t, st, next.Identity), []string{"hi", "hello", "plan a trip", "A2"})
	})
	if got := texts(t, st, first.Identity); len(got) != 0 {
		t.Errorf("the default conversation holds %q, want nothing: the first turn adopted", got)
	}
}
