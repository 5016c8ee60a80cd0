package record

import (
	"context"
	"sync"
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
			opts := Options{OpTimeout: 500 * time.Millisecond, SaveWait: time.Second, DeadLetters: s}
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
	c := mustCapturer(t, q, s, nil, Options{Lanes: 1, OpTimeout: 500 * time.Millisecond, SaveWait: time.Second, Batches: s, DeadLetters: s})
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
