package record

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// parsed is a message parsed as the proxy parses it.
func parsed(tb testing.TB, role, text string) memory.Message {
	tb.Helper()
	m, err := memory.ParseMessage(fmt.Appendf(nil, `{"role":%q,"content":%q}`, role, text))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// chatTurns builds a headerless full-history chat's request: a system
// prompt, then texts alternating user and assistant.
func chatTurns(tb testing.TB, texts ...string) []memory.Message {
	tb.Helper()
	out := []memory.Message{parsed(tb, "system", "You are helpful.")}
	for i, s := range texts {
		out = append(out, parsed(tb, []string{"user", "assistant"}[i%2], s))
	}
	return out
}

// routedExchange is the exchange the proxy captures for a request of user
// that names no conversation (msgs, its system prompt included), answered
// with reply: in its implied conversation, routed by r when derived, with
// the Candidate, Root and BranchSeed the proxy sets.
func routedExchange(tb testing.TB, r *Router, user string, msgs []memory.Message, reply string) memory.Exchange {
	tb.Helper()
	id := memory.Identity{Tenant: "t1", User: user}
	id.Conversation = memory.ImpliedConversation(id.Tenant, id.User, msgs)
	ex := memory.Exchange{ID: NewExchangeID(), Model: "m", Reply: parsed(tb, "assistant", reply)}
	if id.Conversation != memory.DefaultConversation {
		routed, _, _ := r.Route(context.Background(), id, msgs, memory.CutRequest(msgs, 0))
		id.Conversation = routed.Conversation
		ex.Derived, ex.Root, ex.BranchSeed = true, routed.Root, routed.Seed
	}
	ex.Identity, ex.Candidate = id, memory.Candidate(id.Tenant, id.User, msgs)
	var rest []memory.Message
	for _, m := range msgs {
		if !memory.IsSystem(m.Role) {
			rest = append(rest, m)
		}
	}
	ex.Prior, ex.Turn = memory.SplitAnswered(rest)
	return ex
}

// opener is two chats of one user opening alike ("hi", answered
// differently), their first turns stored in the default conversation, and
// their second turns routed while their derived conversation was empty:
// in flight together.
type opener struct {
	a1, b1, a2, b2 memory.Exchange
	derived        string
}

func newOpener(tb testing.TB, r *Router) opener {
	tb.Helper()
	var o opener
	o.a1 = routedExchange(tb, r, "ana", chatTurns(tb, "hi"), "Hello A")
	o.b1 = routedExchange(tb, r, "ana", chatTurns(tb, "hi"), "Hello B")
	o.derived = o.a1.Candidate
	return o
}

// route2 routes both second turns; call it once the first turns are
// stored, before either second turn is.
func (o *opener) route2(tb testing.TB, r *Router) {
	tb.Helper()
	o.a2 = routedExchange(tb, r, "ana", chatTurns(tb, "hi", "Hello A", "plan a trip"), "A2")
	o.b2 = routedExchange(tb, r, "ana", chatTurns(tb, "hi", "Hello B", "write a letter"), "B2")
	if o.a2.Conversation != o.derived || o.b2.Conversation != o.derived {
		tb.Fatalf("second turns routed to %q and %q, want both to %q", o.a2.Conversation, o.b2.Conversation, o.derived)
	}
}

// check asserts each chat ends where its next request is routed, holding
// its turns once, in order, nothing superseded, and the default
// conversation empty (each first turn adopted, or a duplicate).
func (o *opener) check(tb testing.TB, r *Router, st *sqlite.Store) {
	tb.Helper()
	ctx := context.Background()
	a3 := routedExchange(tb, r, "ana", chatTurns(tb, "hi", "Hello A", "plan a trip", "A2", "shoes"), "A3")
	b3 := routedExchange(tb, r, "ana", chatTurns(tb, "hi", "Hello B", "write a letter", "B2", "for a nurse"), "B3")
	if a3.Conversation != o.derived || b3.Conversation == o.derived || b3.Root != o.derived {
		tb.Fatalf("third turns routed to %q and %q (root %q), want chat A in %q and chat B in a branch of it",
			a3.Conversation, b3.Conversation, b3.Root, o.derived)
	}
	for conv, want := range map[string]string{
		o.derived:                  "hi|Hello A|plan a trip|A2",
		b3.Conversation:            "hi|Hello B|write a letter|B2",
		memory.DefaultConversation: "",
	} {
		id := memory.Identity{Tenant: "t1", User: "ana", Conversation: conv}
		msgs, err := st.Recent(ctx, id, 100)
		if err != nil {
			tb.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.Content)
		}
		branches, err := st.Branches(ctx, id, 0)
		if err != nil {
			tb.Fatal(err)
		}
		if strings.Join(got, "|") != want || len(branches) != 0 {
			tb.Fatalf("%s holds %q (%d superseded branches), want %q", conv, got, len(branches), want)
		}
	}
}

// TestCaptureRoutesAgainWhenAnotherChatGotThereFirst: two chats' second
// turns routed to their (empty) derived conversation before either is
// stored. The one stored second parts from the first's history: it is
// stored in the branch its chat's next request goes to, with its first
// turn, instead of superseding the first chat's turns — stored one by
// one, in one group commit, or by the Worker from the capture queue.
func TestCaptureRoutesAgainWhenAnotherChatGotThereFirst(t *testing.T) {
	for _, how := range []string{"one by one", "one group commit", "worker"} {
		t.Run(how, func(t *testing.T) {
			st := mustSQLite(t)
			rs := newRoutingStore(st)
			r := NewRouter(rs, nil, nil, nil)
			gate := &gatedSaver{routingStore: rs}
			c := mustCapturer(t, st.Outbox(), gate, nil, Options{Batches: gate, DeadLetters: st, Adopter: st, Router: r, Lanes: 1})
			o := newOpener(t, r)
			c.Capture(context.Background(), o.a1)
			c.Capture(context.Background(), o.b1)
			o.route2(t, r)
			switch how {
			case "one by one":
				c.Capture(context.Background(), o.a2)
				c.Capture(context.Background(), o.b2)
			case "one group commit":
				// A save of another conversation holds the lane while
				// both second turns queue up behind it: the lane stores
				// them in one transaction.
				release := gate.hold()
				var wg sync.WaitGroup
				other := exchange(t, "other", "q", "a")
				wg.Go(func() { c.Capture(context.Background(), other) })
				waitFor(t, "the lane to store another exchange", func() bool { return gate.holding() })
				wg.Go(func() { c.Capture(context.Background(), o.a2) })
				waitFor(t, "chat A's turn in the lane", func() bool { return value(t, c.metrics.captured) == 4 })
				wg.Go(func() { c.Capture(context.Background(), o.b2) })
				waitFor(t, "chat B's turn in the lane", func() bool { return value(t, c.metrics.captured) == 5 })
				release()
				wg.Wait()
				if gate.largest() != 2 {
					t.Fatalf("largest group commit %d, want both second turns in one", gate.largest())
				}
			case "worker":
				enqueue(t, st.Outbox(), o.a2)
				enqueue(t, st.Outbox(), o.b2)
				mustRunWorker(t, NewWorker(st.Outbox(), rs, nil, workerWithStore(WorkerOptions{Router: r}, rs)))
				waitFor(t, "the outbox drained", func() bool { return outboxPending(t, st) == 0 })
			}
			o.check(t, r, st)
		})
	}
}

// TestCaptureFirstTurnAfterItsContinuationInABranch: chat B's first turn
// is captured after its continuation, which its history sent to a branch
// of the derived conversation chat A holds (stored there, resending the
// first turn). The first turn is then a duplicate: it does not stay in
// the default conversation (where it would show in the user's other chat),
// and the branch holds it once.
func TestCaptureFirstTurnAfterItsContinuationInABranch(t *testing.T) {
	for _, routed := range []string{"to the branch", "to the derived conversation, then again"} {
		t.Run(routed, func(t *testing.T) {
			st := mustSQLite(t)
			rs := newRoutingStore(st)
			r := NewRouter(rs, nil, nil, nil)
			c := mustCapturer(t, st.Outbox(), rs, nil, withStore(Options{Router: r}, rs))
			o := newOpener(t, r)
			c.Capture(context.Background(), o.a1)
			if routed == "to the derived conversation, then again" {
				o.route2(t, r)
				c.Capture(context.Background(), o.a2)
			} else {
				o.a2 = routedExchange(t, r, "ana", chatTurns(t, "hi", "Hello A", "plan a trip"), "A2")
				c.Capture(context.Background(), o.a2)
				o.b2 = routedExchange(t, r, "ana", chatTurns(t, "hi", "Hello B", "write a letter"), "B2")
				if o.b2.Root != o.derived {
					t.Fatalf("chat B's turn routed to %q (root %q), want a branch of %q", o.b2.Conversation, o.b2.Root, o.derived)
				}
			}
			c.Capture(context.Background(), o.b2)
			c.Capture(context.Background(), o.b1) // overtaken
			o.check(t, r, st)
		})
	}
}

// gatedSaver is a store whose group commits can be held (hold) until
// released, and which records the largest group it committed.
type gatedSaver struct {
	routingStore
	mu      sync.Mutex
	gate    chan struct{} // closed to release; nil: not held
	waiting bool
	most    int
}

// hold makes the next group commits wait until the returned func is called.
func (g *gatedSaver) hold() (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	gate := g.gate
	return func() { close(gate) }
}

// holding reports whether a group commit waits at the gate.
func (g *gatedSaver) holding() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

func (g *gatedSaver) largest() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

func (g *gatedSaver) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	g.mu.Lock()
	gate := g.gate
	g.waiting = gate != nil
	g.most = max(g.most, len(exs))
	g.mu.Unlock()
	if gate != nil {
		<-gate
		g.mu.Lock()
		g.gate, g.waiting = nil, false
		g.mu.Unlock()
	}
	return g.routingStore.SaveExchanges(ctx, exs)
}
