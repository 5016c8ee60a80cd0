package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var errDown = errors.New("service down")

// fakeQueue is an in-memory Queue with the claim semantics of the contract.
type fakeQueue struct {
	mu      sync.Mutex
	next    int
	entries map[string]*fakeEntry
	order   []string
	notify  chan struct{}
	fail    error         // Enqueue fails with it when set
	block   chan struct{} // Enqueue waits on it when set
	enqueue int
}

type fakeEntry struct {
	payload   []byte
	consumer  string
	claimedAt time.Time
	attempts  int
}

func newFakeQueue() *fakeQueue {
	return &fakeQueue{entries: map[string]*fakeEntry{}, notify: make(chan struct{}, 1)}
}

func (q *fakeQueue) setFail(err error) { q.mu.Lock(); q.fail = err; q.mu.Unlock() }

func (q *fakeQueue) Enqueue(ctx context.Context, payload []byte) error {
	q.mu.Lock()
	block, fail := q.block, q.fail
	q.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	id := fmt.Sprint(q.next)
	q.entries[id] = &fakeEntry{payload: slices.Clone(payload)}
	q.order = append(q.order, id)
	q.enqueue++
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return nil
}

// EnqueueBatch enqueues payloads one by one, as a queue without batches
// would.
func (q *fakeQueue) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	for _, p := range payloads {
		if err := q.Enqueue(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (q *fakeQueue) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	deadline := time.Now().Add(block)
	for {
		if ds := q.claimOnce(consumer, max, staleAfter); len(ds) > 0 {
			return ds, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(wait, 5*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-q.notify:
			t.Stop()
		case <-t.C:
		}
	}
}

func (q *fakeQueue) claimOnce(consumer string, max int, staleAfter time.Duration) []memory.Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []memory.Delivery
	now := time.Now()
	take := func(id string, e *fakeEntry) {
		e.consumer, e.claimedAt = consumer, now
		e.attempts++
		out = append(out, memory.Delivery{ID: id, Payload: e.payload, Attempts: e.attempts})
	}
	for _, id := range q.order { // stale first
		if e, ok := q.entries[id]; ok && e.consumer != "" && now.Sub(e.claimedAt) >= staleAfter && len(out) < max {
			take(id, e)
		}
	}
	for _, id := range q.order {
		if e, ok := q.entries[id]; ok && e.consumer == "" && len(out) < max {
			take(id, e)
		}
	}
	return out
}

func (q *fakeQueue) Ack(ctx context.Context, ids ...string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		delete(q.entries, id)
	}
	return nil
}

func (q *fakeQueue) Pending(ctx context.Context) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.entries)), nil
}

// Oldest answers the zero time: the fake keeps no enqueue times, and
// no test of record reads them.
func (q *fakeQueue) Oldest(ctx context.Context) (time.Time, error) { return time.Time{}, nil }

func (q *fakeQueue) Purge(ctx context.Context, match func([]byte) bool) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for id, e := range q.entries {
		if match(e.payload) {
			delete(q.entries, id)
			n++
		}
	}
	return n, nil
}

func (q *fakeQueue) payloads() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out [][]byte
	for _, id := range q.order {
		if e, ok := q.entries[id]; ok {
			out = append(out, e.payload)
		}
	}
	return out
}

// fakeSaver stores exchanges idempotently by id, in arrival order.
type fakeSaver struct {
	mu    sync.Mutex
	saved map[string]memory.Exchange
	order []string
	calls int
	fail  error
}

func newFakeSaver() *fakeSaver { return &fakeSaver{saved: map[string]memory.Exchange{}} }

func (s *fakeSaver) setFail(err error) { s.mu.Lock(); s.fail = err; s.mu.Unlock() }

func (s *fakeSaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail != nil {
		return memory.SaveResult{}, s.fail
	}
	if _, ok := s.saved[ex.ID]; ok {
		return memory.SaveResult{Duplicate: true}, nil
	}
	s.saved[ex.ID] = ex
	s.order = append(s.order, ex.ID)
	return memory.SaveResult{Inserted: len(ex.Turn) + 1}, nil
}

// callCount is how many times SaveExchange was called.
func (s *fakeSaver) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *fakeSaver) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

func (s *fakeSaver) get(id string) (memory.Exchange, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ex, ok := s.saved[id]
	return ex, ok
}

// exchange builds a small exchange with the given id.
func exchange(tb testing.TB, id, userText, replyText string) memory.Exchange {
	tb.Helper()
	msg := func(role, text string) memory.Message {
		raw := fmt.Sprintf(`{"role":%q,"content":%q}`, role, text)
		m, err := memory.ParseMessage([]byte(raw))
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	return memory.Exchange{
		ID:       id,
		Identity: memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"},
		Model:    "gpt-4o",
		Turn:     []memory.Message{msg("user", userText)},
		Reply:    msg("assistant", replyText),
		At:       time.Now().UTC(),
	}
}

// mustCapturer starts a Capturer and closes it when the test ends.
// storeCaps are what a store offers a Capturer and a Worker besides
// saving, which the gateway wires in (see withStore).
type storeCaps interface {
	BatchSaver
	DeadLetterer
	Adopter
}

// withStore returns o with st's group commits, dead letters, adoption and
// stamps (when it reads them), as the gateway wires a store into a
// Capturer.
func withStore(o Options, st storeCaps) Options {
	o.Batches, o.DeadLetters, o.Adopter = st, st, st
	if sr, ok := st.(StampReader); ok {
		o.Stamps = sr
	}
	return o
}

// workerWithStore returns o with st's dead letters and adoption, as the
// gateway wires a store into a Worker.
func workerWithStore(o WorkerOptions, st storeCaps) WorkerOptions {
	o.DeadLetters, o.Adopter = st, st
	return o
}

func mustCapturer(tb testing.TB, q Queue, s Saver, r Redactor, opts Options) *Capturer {
	tb.Helper()
	c := New(q, s, r, nil, opts)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// value reads a counter or gauge.
func value(tb testing.TB, c prometheus.Collector) float64 {
	tb.Helper()
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			tb.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			total += d.Counter.GetValue()
		case d.Gauge != nil:
			total += d.Gauge.GetValue()
		}
	}
	return total
}

// histCount reads a histogram's observation count.
func histCount(tb testing.TB, h prometheus.Histogram) uint64 {
	tb.Helper()
	var d dto.Metric
	if err := h.Write(&d); err != nil {
		tb.Fatal(err)
	}
	return d.Histogram.GetSampleCount()
}
