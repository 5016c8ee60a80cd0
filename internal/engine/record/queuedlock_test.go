package record

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/testenv"
)

// TestQueuedChatSkipsTheLockWait: a chat whose turns wait in the shared
// capture queue (another gateway queued one) has its next turn sent to
// the queue behind them at once, without waiting for the chat's lock
// (held meanwhile by another gateway, here for the whole test, with
// OpTimeout an hour): the turn is not stored there, only queued, so its
// lock is not needed.
func TestQueuedChatSkipsTheLockWait(t *testing.T) {
	for name, open := range sharedStores() {
		t.Run(name, func(t *testing.T) {
			s1, s2 := open(t)
			user := "ana-" + NewExchangeID()
			_, next, third := chatOf(t, user, "chat-x")
			chat, ok := memory.ChatOf(third)
			if !ok {
				t.Fatal("the turn is of no chat")
			}
			ctx := context.Background()

			q := captureQueue(t, s2)
			c := mustCapturer(t, q, s2, nil, withStore(Options{Chats: NewChatLocks(s2), Shared: q, OpTimeout: time.Hour}, s2))
			// Gateway 1 queued the chat's turn before, and holds its lock.
			if err := q.EnqueueTurn(ctx, ConvKey(next.Identity), mustJSON(t, next)); err != nil {
				t.Fatal(err)
			}
			_, unlock, err := s1.LockChats(ctx, []memory.Identity{chat})
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()

			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() { c.Capture(ctx, third) })
			waitLong(t, "the turn queued behind the chat's queued turn", func() bool { return value(t, c.metrics.queued) == 1 })
			if n := value(t, c.metrics.saved); n != 0 {
				t.Errorf("%v turns stored, want none: the chat's turn waits in the queue", n)
			}
			if n := value(t, c.metrics.failures.WithLabelValues("chat_lock")); n != 0 {
				t.Errorf("%v failed waits for the chat's lock, want none asked", n)
			}
		})
	}
}

// TestHeldChatLockKeepsTheTurnWithoutQueue: without a capture queue
// (PostgreSQL without Redis), a chat's turn whose lock another gateway
// holds past Options.RetryFor is not set aside as a dead letter — a dead
// letter is never stored later, and the turn was answered — but keeps
// waiting in place, reported (failures{stage="chat_lock_held"}), and is
// stored once the lock frees.
func TestHeldChatLockKeepsTheTurnWithoutQueue(t *testing.T) {
	s2, next, unlock := heldChatTurn(t)
	defer unlock()
	ctx := context.Background()

	c := mustCapturer(t, nil, s2, nil, withStore(Options{Chats: NewChatLocks(s2), OpTimeout: time.Second, RetryFor: time.Second,
		RetryBase: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, SaveWait: 10 * time.Millisecond}, s2))
	held := c.metrics.failures.WithLabelValues("chat_lock_held")
	c.Capture(ctx, next)
	waitLong(t, "the turn past RetryFor: reported, or set aside", func() bool {
		return value(t, held)+value(t, c.metrics.deadLetters) > 0
	})
	if n := value(t, c.metrics.deadLetters); n != 0 {
		t.Fatalf("%v dead letters, want none: the turn waits for its chat's lock", n)
	}
	unlock()
	waitLong(t, "the turn stored once the lock freed", func() bool { return value(t, c.metrics.saved) > 0 })
	if got := texts(t, s2, next.Identity); !slices.Contains(got, "plan a trip") {
		t.Errorf("conversation holds %q, want the turn", got)
	}
	if n := value(t, c.metrics.deadLetters); n != 0 {
		t.Errorf("%v dead letters, want none", n)
	}
}

// TestHeldChatLockWaitIsBounded: a chat turn whose lock another gateway
// holds waits past Options.RetryFor only up to Options.LockWaitFor: past
// it the turn is set aside as a dead letter (reported as held first), so
// that no turn waits in place for ever.
func TestHeldChatLockWaitIsBounded(t *testing.T) {
	s2, next, unlock := heldChatTurn(t)
	defer unlock()
	ctx := context.Background()

	c := mustCapturer(t, nil, s2, nil, withStore(Options{Chats: NewChatLocks(s2), OpTimeout: 200 * time.Millisecond, RetryFor: time.Second,
		LockWaitFor: 2 * time.Second, RetryBase: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, SaveWait: 10 * time.Millisecond}, s2))
	c.Capture(ctx, next)
	waitLong(t, "the turn set aside past LockWaitFor", func() bool { return value(t, c.metrics.deadLetters) == 1 })
	if n := value(t, c.metrics.failures.WithLabelValues("chat_lock_held")); n != 1 {
		t.Errorf("failures{stage=chat_lock_held} = %v, want 1: reported while it waited", n)
	}
	if n := value(t, c.metrics.saved); n != 0 {
		t.Errorf("%v turns stored, want none: the lock never freed", n)
	}
}

// TestLockWaitForDefaultsToADay: Options.LockWaitFor is a day unless set,
// and never longer (DefaultLockWaitFor).
func TestLockWaitForDefaultsToADay(t *testing.T) {
	for _, tt := range []struct{ set, want time.Duration }{
		{0, 24 * time.Hour},
		{time.Hour, time.Hour},
		{48 * time.Hour, 24 * time.Hour},
	} {
		if got := (Options{LockWaitFor: tt.set}).withDefaults().LockWaitFor; got != tt.want {
			t.Errorf("LockWaitFor %v: got %v, want %v", tt.set, got, tt.want)
		}
	}
}

// heldChatTurn returns a second PostgreSQL store, a chat turn to capture
// through it, and what unlocks that chat's lock, held by a first store
// (another gateway) until then.
func heldChatTurn(t *testing.T) (s2 *postgres.Store, next memory.Exchange, unlock func()) {
	t.Helper()
	url := testenv.PostgresURL(t)
	s1 := mustPostgresAt(t, url)
	s2 = mustPostgresAt(t, url)
	_, next, _ = chatOf(t, "ana-"+NewExchangeID(), "chat-x")
	chat, ok := memory.ChatOf(next)
	if !ok {
		t.Fatal("the turn is of no chat")
	}
	_, unlock, err := s1.LockChats(context.Background(), []memory.Identity{chat})
	if err != nil {
		t.Fatal(err)
	}
	return s2, next, unlock
}
