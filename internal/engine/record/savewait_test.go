package record

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestHungStoreQueuesTheTurnBeforeItIsAnswered: a store that hangs (a
// PostgreSQL that stopped answering) fails each save only when OpTimeout
// runs out. After the first such failure the turn goes to the capture
// queue rather than being tried again in the store, so that it is durable
// before Capture gives up waiting (SaveWait) and the reply goes to the
// client: a crash after the answer then loses nothing. Before, the
// immediate retry ran past SaveWait and the turn reached the queue only
// after the client had its answer (live: a gateway killed then lost every
// answered turn).
func TestHungStoreQueuesTheTurnBeforeItIsAnswered(t *testing.T) {
	for _, group := range []bool{true, false} {
		name := map[bool]string{true: "group commit", false: "one by one"}[group]
		t.Run(name, func(t *testing.T) {
			s := newGateSaver() // its gate never opens: every save hangs
			q := newFakeQueue()
			opts := Options{OpTimeout: time.Second, SaveWait: 2500 * time.Millisecond, DeadLetters: s}
			if group {
				opts.Batches = s
			}
			c := mustCapturer(t, q, s, nil, opts)
			c.Capture(context.Background(), exchange(t, "r1", "hi", "hello"))
			if n := len(q.payloads()); n != 1 {
				t.Fatalf("when Capture returned (the reply goes out), the capture queue held %d exchanges, want 1", n)
			}
			if got := value(t, c.metrics.failures.WithLabelValues("save_wait")); got != 0 {
				t.Errorf("failures{save_wait} = %v, want 0", got)
			}
		})
	}
}

// enteredSaver is a gateSaver that says when its first group commit began.
type enteredSaver struct {
	*gateSaver
	entered chan struct{}
	once    sync.Once
}

func (s *enteredSaver) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	s.once.Do(func() { close(s.entered) })
	return s.gateSaver.SaveExchanges(ctx, exs)
}

// TestTurnBehindAHungSaveIsQueuedBeforeItIsAnswered: a turn that waited in
// its lane behind a hung save (another conversation's) starts late; it
// goes to the capture queue at once rather than into a save of its own
// that would outlast SaveWait.
func TestTurnBehindAHungSaveIsQueuedBeforeItIsAnswered(t *testing.T) {
	s := &enteredSaver{gateSaver: newGateSaver(), entered: make(chan struct{})}
	q := newFakeQueue()
	c := mustCapturer(t, q, s, nil, Options{Lanes: 1, OpTimeout: time.Second, SaveWait: 2500 * time.Millisecond, Batches: s, DeadLetters: s})
	first := make(chan struct{})
	go func() {
		defer close(first)
		c.Capture(context.Background(), exchange(t, "r1", "hi", "hello"))
	}()
	<-s.entered
	second := exchange(t, "r2", "other", "reply")
	second.Conversation = "elsewhere"
	c.Capture(context.Background(), second)
	<-first
	if n := len(q.payloads()); n != 2 {
		t.Fatalf("when both Captures returned, the capture queue held %d exchanges, want 2", n)
	}
}

// TestCaptureReportsWhetherTheTurnIsDurable: Capture reports true for a
// turn stored, or queued, before it returned, and false for one the store
// still holds when SaveWait ran out (its reply is marked, see
// memory.DegradedCapture).
func TestCaptureReportsWhetherTheTurnIsDurable(t *testing.T) {
	stored := mustCapturer(t, nil, newFakeSaver(), nil, Options{})
	if !stored.Capture(context.Background(), exchange(t, "r1", "hi", "hello")) {
		t.Error("Capture of a turn stored = false, want true")
	}
	hung := newGateSaver()
	queued := mustCapturer(t, newFakeQueue(), hung, nil, Options{OpTimeout: 100 * time.Millisecond, SaveWait: time.Minute, Batches: hung, DeadLetters: hung})
	if !queued.Capture(context.Background(), exchange(t, "r2", "hi", "hello")) {
		t.Error("Capture of a turn queued = false, want true")
	}
	held := mustCapturer(t, nil, newGateSaver(), nil, Options{SaveWait: 50 * time.Millisecond})
	if held.Capture(context.Background(), exchange(t, "r3", "hi", "hello")) {
		t.Error("Capture of a turn the store still holds = true, want false")
	}
}

// hungQueue is a fakeQueue whose enqueues hang until their deadline (a
// Redis that stopped answering).
type hungQueue struct {
	*fakeQueue
	calls atomic.Int64
	// deaf: until it is closed, an enqueue hangs past its deadline too
	// (go-redis dialing a Redis that accepts connections but answers
	// nothing).
	deaf chan struct{}
}

func (q *hungQueue) Enqueue(ctx context.Context, payload []byte) error {
	q.calls.Add(1)
	if q.deaf != nil {
		<-q.deaf
	}
	<-ctx.Done()
	return ctx.Err()
}

func (q *hungQueue) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	return q.Enqueue(ctx, nil)
}

// TestHungEnrichmentQueueHoldsNoTurnPastSaveWait: the enrichment queue
// hanging (Redis stopped answering, PostgreSQL fine) costs a lane one
// OpTimeout, not one per stored batch: once an enqueue ran out of it, the
// next batches' exchanges are stored without enrichment, counted, until
// OpTimeout has passed. Before, each batch waited out two enqueues (a
// failure was retried), so the turns behind it in its lane were still not
// stored when Capture stopped waiting (live: 3 of 5 answered turns lost to
// a kill -9 while Redis hung). An enqueue that outlasts its deadline (the
// client's dial ignores it) is not waited for past it either.
func TestHungEnrichmentQueueHoldsNoTurnPastSaveWait(t *testing.T) {
	for _, deaf := range []bool{false, true} {
		t.Run(map[bool]string{false: "deadline kept", true: "deadline ignored"}[deaf], func(t *testing.T) {
			testHungEnrichment(t, deaf)
		})
	}
}

func testHungEnrichment(t *testing.T, deaf bool) {
	s := newFakeSaver()
	eq := &hungQueue{fakeQueue: newFakeQueue()}
	if deaf {
		eq.deaf = make(chan struct{})
		defer close(eq.deaf)
	}
	c := mustCapturer(t, nil, s, nil, Options{Lanes: 1, Batch: 1, Enrich: eq, OpTimeout: 2 * time.Second, SaveWait: 5 * time.Second})
	const turns = 4
	durable := make(chan bool, turns)
	for i := range turns {
		ex := exchange(t, fmt.Sprint("r", i), "hi", "hello")
		ex.Conversation = fmt.Sprint("c", i)
		go func() { durable <- c.Capture(context.Background(), ex) }()
	}
	for range turns {
		if !<-durable {
			t.Fatal("a turn was not stored when Capture stopped waiting")
		}
	}
	// A turn is durable once stored; its enrichment is given up after.
	waitFor(t, "every exchange counted unenriched", func() bool { return value(t, c.metrics.enrichLost) >= turns })
	if got := value(t, c.metrics.enrichLost); got != turns {
		t.Errorf("exchanges left unenriched = %v, want %d", got, turns)
	}
	if n := eq.calls.Load(); n != 1 {
		t.Errorf("enrichment enqueues tried %d times, want 1 (the queue hung)", n)
	}
}
