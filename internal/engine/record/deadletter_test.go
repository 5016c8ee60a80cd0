package record

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestDeadLetterCarriesReceived: a dead letter, set aside by the request
// path or by the queue's worker, carries when its exchange was received,
// which the store compares with the conversation's deletion so that a turn
// in flight during the deletion does not keep its text at rest.
func TestDeadLetterCarriesReceived(t *testing.T) {
	received := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	refused := func(t *testing.T) (*gateSaver, memory.Exchange) {
		s := newGateSaver()
		close(s.gate)
		s.refuse = func(memory.Exchange) bool { return true }
		ex := exchange(t, NewExchangeID(), "hi", "hello")
		ex.Received = received
		return s, ex
	}
	check := func(t *testing.T, s *gateSaver) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.dead) != 1 {
			t.Fatalf("%d dead letters, want 1", len(s.dead))
		}
		if got := s.dead[0].Received; !got.Equal(received) {
			t.Fatalf("dead letter received at %v, want %v", got, received)
		}
	}
	t.Run("capturer", func(t *testing.T) {
		s, ex := refused(t)
		c := mustCapturer(t, nil, s, nil, Options{Lanes: 1, Batches: s, DeadLetters: s})
		c.Capture(context.Background(), ex)
		check(t, s)
	})
	t.Run("worker", func(t *testing.T) {
		s, ex := refused(t)
		q := newFakeQueue()
		enqueue(t, q, ex)
		opts := fastWorker()
		opts.DeadLetters = s
		w := NewWorker(q, s, nil, opts)
		mustRunWorker(t, w)
		waitFor(t, "refused exchange acked", func() bool { return pending(t, q) == 0 })
		check(t, s)
	})
}

// receivedAdopter records the received time Adopt is asked with.
type receivedAdopter struct {
	Adopter
	received time.Time
}

func (a *receivedAdopter) Adopt(_ context.Context, _ memory.Identity, _ string, _ []memory.Message, received time.Time, _ memory.Fence) (int, error) {
	a.received = received
	return 0, nil
}

// TestAdoptIsAskedWithReceived: a continuation's adoption of its chat's
// first turns is asked with when the continuation was received, so that
// the store moves nothing into a conversation deleted since.
func TestAdoptIsAskedWithReceived(t *testing.T) {
	received := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ex := exchange(t, NewExchangeID(), "next", "reply")
	ex.Derived, ex.Received = true, received
	ex.Prior = []memory.Message{ex.Turn[0], ex.Reply}
	a := &receivedAdopter{}
	adoptFirstTurns(context.Background(), a, ex, slog.New(slog.DiscardHandler))
	if !a.received.Equal(received) {
		t.Fatalf("Adopt asked with received %v, want %v", a.received, received)
	}
}

// TestCapturerWithoutQueueGivesUpInTime: without a capture queue
// (PostgreSQL without Redis), a turn whose save keeps timing out is
// retried for Options.RetryFor, then set aside as a dead letter, counted,
// and its lane goes on: the next turn is stored.
func TestCapturerWithoutQueueGivesUpInTime(t *testing.T) {
	s := newGateSaver() // the gate stays shut: every save times out
	c := mustCapturer(t, nil, s, nil, Options{Lanes: 1, DeadLetters: s, OpTimeout: 5 * time.Millisecond,
		RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, RetryFor: 50 * time.Millisecond, SaveWait: time.Millisecond})
	stuck := exchange(t, NewExchangeID(), "hi", "hello")
	c.Capture(context.Background(), stuck)
	waitFor(t, "the turn set aside", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.dead) == 1
	})
	s.mu.Lock()
	d := s.dead[0]
	s.mu.Unlock()
	if len(d.Payload) == 0 || !strings.Contains(d.Reason, "not stored within") {
		t.Errorf("dead letter %q with %d bytes, want the turn's payload, its reason the time it was retried", d.Reason, len(d.Payload))
	}
	if got := value(t, c.metrics.deadLetters); got != 1 {
		t.Errorf("memgate_capture_dead_letters_total = %v, want 1", got)
	}
	close(s.gate)
	next := exchange(t, NewExchangeID(), "again", "hello")
	c.Capture(context.Background(), next)
	waitFor(t, "the next turn stored", func() bool { return len(s.ids()) == 1 })
}
