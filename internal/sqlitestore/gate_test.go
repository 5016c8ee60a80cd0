package sqlitestore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWriteGateLetsClientsFirst queues background and client transactions
// behind a running one, in a mixed order, and checks the order they get the
// writer in: every client one first, each class first come first served,
// one at a time.
func TestWriteGateLetsClientsFirst(t *testing.T) {
	var g writeGate
	ctx := context.Background()
	if err := g.acquire(ctx, true); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 8)
	arrivals := []struct {
		name       string
		background bool
	}{{"bg1", true}, {"client1", false}, {"bg2", true}, {"client2", false}}
	for i, a := range arrivals {
		go func() {
			if err := g.acquire(ctx, a.background); err != nil {
				t.Error(err)
				return
			}
			order <- a.name
			g.release()
		}()
		// Queue them in this order.
		waitFor(t, a.name+" to queue", func() bool { h, l := g.waiting(); return h+l == i+1 })
	}
	g.release()
	want := []string{"client1", "client2", "bg1", "bg2"}
	for i, w := range want {
		if got := <-order; got != w {
			t.Fatalf("turn %d went to %s, want %s (order %v)", i, got, w, want)
		}
	}
	waitFor(t, "the writer to be free", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return !g.busy })
}

// TestWriteGateGivesUpOnContext checks a waiter whose context ends leaves
// the queue holding nothing, and the writer still passes to the next one.
func TestWriteGateGivesUpOnContext(t *testing.T) {
	var g writeGate
	if err := g.acquire(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.acquire(ctx, false) }()
	waitFor(t, "the waiter to queue", func() bool { h, _ := g.waiting(); return h == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire = %v, want context.Canceled", err)
	}
	if h, l := g.waiting(); h+l != 0 {
		t.Fatalf("%d+%d still waiting", h, l)
	}
	next := make(chan error, 1)
	go func() { next <- g.acquire(context.Background(), true) }()
	waitFor(t, "the next waiter to queue", func() bool { _, l := g.waiting(); return l == 1 })
	g.release()
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	g.release()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy {
		t.Fatal("the writer is still held after the last release")
	}
}
