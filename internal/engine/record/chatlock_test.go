package record

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// stuckChatLocker is a store's ChatLocker whose lock on one chat is held
// by a process that died (released only when the test says so): a wait
// for it lasts until its context ends. Other chats' locks are free.
type stuckChatLocker struct {
	stuck    memory.Identity
	released chan struct{}
	waiting  chan struct{} // closed once a wait for the stuck chat began
	once     sync.Once
}

func (l *stuckChatLocker) LockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), error) {
	for _, id := range chats {
		if id != l.stuck {
			continue
		}
		l.once.Do(func() { close(l.waiting) })
		select {
		case <-l.released:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	return 1, func() {}, nil
}

// TryLockChats takes chats' locks when none is the stuck chat's (held by
// the dead process until released).
func (l *stuckChatLocker) TryLockChats(ctx context.Context, chats []memory.Identity) (memory.Fence, func(), bool, error) {
	if slices.Contains(chats, l.stuck) && !closed(l.released) {
		return 0, nil, false, nil
	}
	fence, unlock, err := l.LockChats(ctx, chats)
	return fence, unlock, err == nil, err
}

// chatTurn is a first turn of chat conv of tenant.
func chatTurn(t *testing.T, tenant, conv string) memory.Exchange {
	ex := exchange(t, NewExchangeID(), "hi", "hello")
	ex.Tenant, ex.Candidate = tenant, conv
	return ex
}

// TestAChatsWaitStallsNoOtherChat: while a Worker waits for the store's
// lock on a chat (left by a process that died), the process's turns of
// other chats — of other tenants too — take their locks at once.
func TestAChatsWaitStallsNoOtherChat(t *testing.T) {
	stuck := chatTurn(t, "t0", "stuck")
	id, _ := memory.ChatOf(stuck)
	store := &stuckChatLocker{stuck: id, released: make(chan struct{}), waiting: make(chan struct{})}
	l := NewChatLocks(store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan struct{})
	go func() {
		defer close(held)
		h, _ := l.lock(ctx, stuck)
		h.unlock()
	}()
	defer func() { close(store.released); <-held }()
	<-store.waiting

	// Enough chats that, spread over 64 stripes, one shares the stuck
	// chat's all but surely.
	done := make(chan error, 1000)
	for i := range cap(done) {
		ex := chatTurn(t, fmt.Sprintf("t%d", i%7+1), fmt.Sprintf("chat-%d", i))
		go func() {
			h, err := l.lock(ctx, ex)
			h.unlock()
			done <- err
		}()
	}
	deadline := time.After(30 * time.Second)
	for range cap(done) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("lock of another chat: %v", err)
			}
		case <-deadline:
			t.Fatal("another chat's lock waits for the stuck chat's")
		}
	}
}

// TestAStuckChatHoldsUpNoOtherChatsRetries: a lane's batch holds turns
// of two chats, and one chat's lock is held by a process that froze: the
// batch's locks cannot be taken. With no capture queue to hand them to,
// each turn is retried under its own chat's locks: the other chat's turn
// is stored while the stuck chat's waits, and that one is stored once
// its lock is free.
func TestAStuckChatHoldsUpNoOtherChatsRetries(t *testing.T) {
	stuck, free := chatTurn(t, "t1", "stuck"), chatTurn(t, "t1", "free")
	id, _ := memory.ChatOf(stuck)
	locker := &stuckChatLocker{stuck: id, released: make(chan struct{}), waiting: make(chan struct{})}
	s := newFakeSaver()
	c := mustCapturer(t, nil, s, nil, Options{Lanes: 1, Chats: NewChatLocks(locker), OpTimeout: 200 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	batch := []*job{newJob(free, time.Now()), newJob(stuck, time.Now())}
	for _, j := range batch {
		c.begin(j.id)
	}
	done := make(chan struct{})
	go func() { defer close(done); c.store(batch) }()
	waitFor(t, "the free chat's turn stored", func() bool { _, ok := s.get(free.ID); return ok })
	if _, ok := s.get(stuck.ID); ok {
		t.Fatal("the stuck chat's turn was stored without its lock")
	}
	close(locker.released)
	<-done
	if got, want := s.ids(), []string{free.ID, stuck.ID}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}
