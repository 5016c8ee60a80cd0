package keylock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocks: a held key makes its next caller wait, until it is unlocked
// or the caller's context ends; other keys are taken at once; a key
// nobody holds or waits for is forgotten.
func TestLocks(t *testing.T) {
	var l Locks[string]
	ctx := context.Background()
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatalf("another key waits: %v", err)
	}
	unlockB()

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Lock(cctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held key's wait ended by its context = %v, want context.Canceled", err)
	}

	got := make(chan func())
	go func() {
		unlock, err := l.Lock(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	deadline := time.Now().Add(30 * time.Second)
	for l.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second caller of a never waits")
		}
		time.Sleep(time.Millisecond)
	}
	unlockA()
	(<-got)()
	if n := len(l.m); n != 0 {
		t.Errorf("%d keys remembered after all were unlocked, want 0", n)
	}
}

// BenchmarkLocks takes and releases a key's lock, each goroutine its own
// keys (the uncontended path every save of a chat takes).
func BenchmarkLocks(b *testing.B) {
	var l Locks[int]
	ctx := context.Background()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		key := int(next.Add(1)) * 1000
		for i := 0; pb.Next(); i++ {
			unlock, _ := l.Lock(ctx, key+i%1000)
			unlock()
		}
	})
}

// TestTryLock: TryLock takes a free key and refuses a held one at once,
// holding nothing then; a key it released is forgotten.
func TestTryLock(t *testing.T) {
	var l Locks[string]
	unlock, ok := l.TryLock("a")
	if !ok {
		t.Fatal("a free key refused")
	}
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("a held key taken twice")
	}
	if _, ok := l.TryLock("b"); !ok {
		t.Fatal("another key refused")
	}
	unlock()
	again, ok := l.TryLock("a")
	if !ok {
		t.Fatal("a released key refused")
	}
	again()
	l.mu.Lock()
	n := len(l.m)
	l.mu.Unlock()
	if n != 1 { // "b" is still held
		t.Errorf("%d keys remembered, want 1", n)
	}
}
