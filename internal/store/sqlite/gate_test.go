package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); {
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

// TestBackgroundAddItemsTakesTurns checks that enrichment's AddItems
// (items derived from captured exchanges: GuardSince set) writes a round's items in transactions of at most
// backgroundItems, each taking the writer anew (so a save waits behind one
// of them), that a client's AddItems stays one transaction, and that every
// item is stored either way.
func TestBackgroundAddItemsTakesTurns(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// items stores an exchange of n messages and returns their items (a
	// guarded item is written only while its message is stored).
	items := func(user string, n int, guardSince time.Time) []memory.Item {
		ex := memory.Exchange{ID: "ex-" + user, Identity: memory.Identity{Tenant: "acme", User: user, Conversation: memory.DefaultConversation},
			At: time.Now(), Reply: memory.Message{Role: "assistant", Content: "answer"}}
		for i := range n - 1 {
			ex.Turn = append(ex.Turn, memory.Message{Role: "user", Content: fmt.Sprint("question ", i)})
		}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
		out := make([]memory.Item, n)
		for i := range out {
			out[i] = memory.Item{Tenant: "acme", User: user, Conversation: memory.DefaultConversation, Kind: "message",
				Ref: memory.Key(ex.ID, i), Text: fmt.Sprint("text ", i), GuardSince: guardSince}
		}
		return out
	}
	captured := time.Now().Add(-time.Second)
	tests := []struct {
		name       string
		guardSince time.Time
		n          int
		txs        int
	}{
		{"background round", captured, 2*backgroundItems + 3, 3},
		{"background, one transaction's worth", captured, backgroundItems, 1},
		{"client", time.Time{}, 2*backgroundItems + 3, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user := fmt.Sprint("u", i)
			its := items(user, tt.n, tt.guardSince)
			before := s.gate.granted()
			if err := s.AddItems(ctx, its); err != nil {
				t.Fatal(err)
			}
			if got := s.gate.granted() - before; got != tt.txs {
				t.Fatalf("%d write transactions, want %d", got, tt.txs)
			}
			got, err := s.SearchText(ctx, memory.ItemQuery{Tenant: "acme", User: user, Text: "text", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.n {
				t.Fatalf("%d items stored, want %d", len(got), tt.n)
			}
		})
	}
}

// granted is how many transactions the gate has let through.
func (g *writeGate) granted() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grants
}

// waiting is how many transactions wait, client and background.
func (g *writeGate) waiting() (high, low int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.high), len(g.low)
}
