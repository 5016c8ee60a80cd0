package record

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// heldFirstTurn is a store whose save of one exchange (id) stops at a
// point until release is closed, having closed reached: before the save
// (after the Worker checked that the exchange was not stored ahead), or,
// as an after-save hook (WithHooks), once it committed and before the
// Worker records its candidate.
type heldFirstTurn struct {
	Saver
	id      string
	after   bool
	reached chan struct{}
	release chan struct{}
}

func (h *heldFirstTurn) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	if ex.ID == h.id && !h.after {
		close(h.reached)
		<-h.release
	}
	return h.Saver.SaveExchange(ctx, ex)
}

// hook is h's after-save hook (used when h.after).
func (h *heldFirstTurn) hook(_ context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
	for _, ex := range exs {
		if ex.ID == h.id {
			close(h.reached)
			<-h.release
		}
	}
	return nil
}

// TestWorkerFirstTurnRacingItsContinuationIntoABranch: chat B's first turn
// waits in the capture queue while chat A holds the derived conversation;
// the Worker stores it at the moment chat B's continuation, routed to a
// branch, is stored by the Capturer — held just before its save, or just
// after it (before its candidate is recorded, where an after-save hook
// runs). Whichever way they interleave, the first turn is stored once, in
// the branch that continues it: not left in the default conversation
// (where it would show in the user's other chat) as well.
func TestWorkerFirstTurnRacingItsContinuationIntoABranch(t *testing.T) {
	for _, after := range []bool{false, true} {
		name := map[bool]string{false: "held before its save", true: "held after its save"}[after]
		t.Run(name, func(t *testing.T) {
			st := mustSQLite(t)
			rs := newRoutingStore(st)
			r := NewRouter(rs, nil, nil, nil)
			chats := NewChatLocks(nil)
			c := mustCapturer(t, nil, rs, nil, withStore(Options{Router: r, Chats: chats}, rs))
			o := newOpener(t, r)
			c.Capture(context.Background(), o.a1)
			o.a2 = routedExchange(t, r, "ana", chatTurns(t, "hi", "Hello A", "plan a trip"), "A2")
			c.Capture(context.Background(), o.a2)
			o.b2 = routedExchange(t, r, "ana", chatTurns(t, "hi", "Hello B", "write a letter"), "B2")
			if o.b2.Root != o.derived {
				t.Fatalf("chat B's turn routed to %q (root %q), want a branch of %q", o.b2.Conversation, o.b2.Root, o.derived)
			}

			held := &heldFirstTurn{Saver: rs, id: o.b1.ID, after: after, reached: make(chan struct{}), release: make(chan struct{})}
			var saver Saver = held
			if after {
				saver = WithHooks(rs, HookFunc(held.hook))
			}
			enqueue(t, st.Outbox(), o.b1)
			mustRunWorker(t, NewWorker(st.Outbox(), saver, nil, workerWithStore(WorkerOptions{Router: r, Chats: chats}, rs)))
			waitLong(t, "the Worker storing chat B's first turn", func() bool { return closed(held.reached) })

			done := make(chan struct{})
			go func() {
				defer close(done)
				c.Capture(context.Background(), o.b2)
			}()
			// The continuation is stored, or waits for the first turn.
			waitLong(t, "chat B's continuation stored or waiting", func() bool { return closed(done) || chats.locks.Waiting() > 0 })
			close(held.release)
			<-done
			waitLong(t, "the outbox drained", func() bool { return outboxPending(t, st) == 0 })
			o.check(t, r, st)
		})
	}
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitLong polls cond until it holds, failing the test after a minute.
func waitLong(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
