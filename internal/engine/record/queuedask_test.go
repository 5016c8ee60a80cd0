package record

import (
	"context"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// countingShared is a SharedQueue that counts its Queued round trips:
// over a durable queue's (real), or over a fakeQueue, where it counts a
// conversation's turns as queued once one was enqueued.
type countingShared struct {
	Queue
	real   SharedQueue // nil: the fake's own counts
	mu     sync.Mutex
	asks   int
	queued map[string]bool
}

func (q *countingShared) EnqueueTurn(ctx context.Context, conv string, payload []byte) error {
	if q.real != nil {
		return q.real.EnqueueTurn(ctx, conv, payload)
	}
	if err := q.Queue.Enqueue(ctx, payload); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued == nil {
		q.queued = map[string]bool{}
	}
	q.queued[conv] = true
	return nil
}

func (q *countingShared) Queued(ctx context.Context, convs ...string) ([]bool, error) {
	q.mu.Lock()
	q.asks++
	q.mu.Unlock()
	if q.real != nil {
		return q.real.Queued(ctx, convs...)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]bool, len(convs))
	for i, c := range convs {
		out[i] = q.queued[c]
	}
	return out, nil
}

func (q *countingShared) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.asks
}

// TestOneQueuedAskPerBatch: storing a batch of a chat's turns asks the
// shared capture queue whether their conversations have turns queued once
// (under the chat's locks, when they are free at once), not once before
// the locks and again under them; and not at all when the conversation
// is known here to have turns queued (this Capturer queued them).
func TestOneQueuedAskPerBatch(t *testing.T) {
	for name, open := range sharedStores() {
		t.Run(name, func(t *testing.T) {
			_, s2 := open(t)
			dq := captureQueue(t, s2)
			q := &countingShared{Queue: dq, real: dq}
			c := mustCapturer(t, q, s2, nil, withStore(Options{Chats: NewChatLocks(s2), Shared: q}, s2))
			first, next, third := chatOf(t, "ana-"+NewExchangeID(), "chat-x")
			ctx := context.Background()
			for i, ex := range []memory.Exchange{first, next, third} {
				// The lane lets go of the chat's locks just after its
				// turn is stored: the next batch finds them free.
				waitFor(t, "the chat's locks free", func() bool {
					h := c.chats.hold(ex)
					ok, err := h.tryTake(ctx)
					h.unlock()
					return ok && err == nil
				})
				c.Capture(ctx, ex)
				if got := q.count(); got != i+1 {
					t.Fatalf("after %d batches, %d Queued asks, want %d: one per batch", i+1, got, i+1)
				}
			}
			if n := value(t, c.metrics.saved); n != 3 {
				t.Errorf("%v turns stored, want 3", n)
			}
		})
	}
	t.Run("known queued here", func(t *testing.T) {
		saver := newFakeSaver()
		saver.setFail(errDown)
		q := &countingShared{Queue: newFakeQueue()}
		c := mustCapturer(t, q, saver, nil, Options{Shared: q})
		_, next, third := chatOf(t, "ana-"+NewExchangeID(), "chat-x")
		ctx := context.Background()
		c.Capture(ctx, next) // its saves fail: to the queue
		if n := value(t, c.metrics.queued); n != 1 {
			t.Fatalf("%v turns queued, want the failed one", n)
		}
		asked := q.count()
		if asked != 1 {
			t.Errorf("%d Queued asks for the first batch, want 1", asked)
		}
		c.Capture(ctx, third)
		if n := value(t, c.metrics.queued); n != 2 {
			t.Fatalf("%v turns queued, want the next behind the first", n)
		}
		if got := q.count(); got != asked {
			t.Errorf("%d Queued asks for a conversation known queued here, want none", got-asked)
		}
	})
}
