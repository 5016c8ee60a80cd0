package record

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// racingStore is one process's handle on a shared store, stretching the
// window between a first turn's check and save, and between its
// continuation's adoption and save: a first turn's save (request first;
// the Capturer gives each exchange its own ID) waits
// until the other process adopted (adopted closed), a continuation's
// (request next) until the other process checked the first turn (checked
// closed) — each at most hold, since a lock may keep the other waiting.
type racingStore struct {
	gatewayReads
	first, next       string
	checked, adopted  chan struct{}
	checkOnce, adOnce *sync.Once
	hold              time.Duration
}

func (s racingStore) Continued(ctx context.Context, ex memory.Exchange) (bool, error) {
	ok, err := s.gatewayReads.Continued(ctx, ex)
	if ex.RequestID == s.first {
		s.checkOnce.Do(func() { close(s.checked) })
	}
	return ok, err
}

func (s racingStore) Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error) {
	n, err := s.gatewayReads.Adopt(ctx, to, candidate, prior, received, fence)
	s.adOnce.Do(func() { close(s.adopted) })
	return n, err
}

func (s racingStore) wait(exs ...memory.Exchange) {
	for _, ex := range exs {
		var ch chan struct{}
		switch ex.RequestID {
		case s.first:
			ch = s.adopted
		case s.next:
			ch = s.checked
		default:
			continue
		}
		select {
		case <-ch:
		case <-time.After(s.hold):
		}
	}
}

func (s racingStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	s.wait(ex)
	return s.gatewayReads.SaveExchange(ctx, ex)
}

func (s racingStore) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	s.wait(exs...)
	return s.gatewayReads.SaveExchanges(ctx, exs)
}

// TestTwoProcessesFirstTurnRacingItsContinuation: a full-history chat's
// first turn is stored by one process — by its Capturer, or by its Worker
// from the capture queue — while its continuation (routed to the derived
// conversation while it was empty) is stored by another process's
// Capturer: two stacks over two handles on one store (a SQLite file both
// open, one PostgreSQL database), sharing nothing in memory, each with its
// own ChatLocks over its own handle, as the gateway wires them. The first
// turn's check and the continuation's adoption run before either save, as
// they can when the two race. Every round, the first turn is stored once:
// the derived conversation holds the chat in order, the default
// conversation nothing.
func TestTwoProcessesFirstTurnRacingItsContinuation(t *testing.T) {
	const rounds = 10
	for name, open := range sharedStores() {
		for _, via := range []string{"capturer", "worker"} {
			t.Run(name+"/first turn stored by the "+via, func(t *testing.T) {
				s1, s2 := open(t)
				for round := range rounds {
					user := "ana-" + NewExchangeID()
					checked, adopted := make(chan struct{}), make(chan struct{})
					var checkOnce, adOnce sync.Once
					p1 := racingStore{gatewayReads: newGatewayReads(s1), checked: checked, adopted: adopted,
						checkOnce: &checkOnce, adOnce: &adOnce, hold: 200 * time.Millisecond}
					p2 := p1
					p2.gatewayReads = newGatewayReads(s2)
					r1, r2 := NewRouter(p1, nil, nil, nil), NewRouter(p2, nil, nil, nil)
					first := routedExchange(t, r1, user, chatTurns(t, "hi"), "Hello")
					next := routedExchange(t, r2, user, chatTurns(t, "hi", "Hello", "plan a trip"), "A2")
					if next.Conversation != first.Candidate {
						t.Fatalf("continuation routed to %q, want the derived %q", next.Conversation, first.Candidate)
					}
					first.RequestID, next.RequestID = first.ID, next.ID
					p1.first, p1.next = first.ID, next.ID
					p2.first, p2.next = first.ID, next.ID
					c2 := mustCapturer(t, nil, p2, nil, withStore(Options{Router: r2, Chats: NewChatLocks(p2)}, p2))
					var wg sync.WaitGroup
					start := make(chan struct{})
					wg.Add(1)
					go func() { defer wg.Done(); <-start; c2.Capture(context.Background(), next) }()
					if via == "capturer" {
						c1 := mustCapturer(t, nil, p1, nil, withStore(Options{Router: r1, Chats: NewChatLocks(p1)}, p1))
						wg.Add(1)
						go func() { defer wg.Done(); <-start; c1.Capture(context.Background(), first) }()
						close(start)
					} else {
						q := NewMemoryQueue(10)
						enqueue(t, q, first)
						o := fastWorker()
						o.Router, o.Chats = r1, NewChatLocks(p1)
						close(start)
						mustRunWorker(t, NewWorker(q, p1, nil, workerWithStore(o, p1)))
						waitLong(t, "the Worker storing the first turn", func() bool {
							n, err := q.Pending(context.Background())
							return err == nil && n == 0
						})
					}
					wg.Wait()
					for conv, want := range map[string][]string{
						first.Candidate:            {"hi", "Hello", "plan a trip", "A2"},
						memory.DefaultConversation: nil,
					} {
						id := memory.Identity{Tenant: "t1", User: user, Conversation: conv}
						if got := texts(t, s1, id); strings.Join(got, "|") != strings.Join(want, "|") {
							t.Fatalf("round %d: %s holds %q, want %q", round, conv, got, want)
						}
					}
				}
			})
		}
	}
}
