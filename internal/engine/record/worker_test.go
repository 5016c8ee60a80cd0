package record

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/prometheus/client_golang/prometheus"
)

// mustRunWorker runs w until the test ends.
func mustRunWorker(tb testing.TB, w *Worker) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
}

func fastWorker() WorkerOptions {
	return WorkerOptions{Consumer: "w1", Batch: 4, StaleAfter: 20 * time.Millisecond, Block: 10 * time.Millisecond,
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond}
}

func enqueue(tb testing.TB, q Queue, ex memory.Exchange) {
	tb.Helper()
	b, err := json.Marshal(ex)
	if err != nil {
		tb.Fatal(err)
	}
	if err := q.Enqueue(context.Background(), b); err != nil {
		tb.Fatal(err)
	}
}

func pending(tb testing.TB, q *fakeQueue) int64 {
	tb.Helper()
	n, _ := q.Pending(context.Background())
	return n
}

func TestWorkerStoresEverythingOnceInOrder(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	var want []string
	for i := range 25 {
		id := fmt.Sprintf("ex%02d", i)
		want = append(want, id)
		enqueue(t, q, exchange(t, id, "hi", "hello"))
	}
	w := NewWorker(q, s, nil, fastWorker())
	mustRunWorker(t, w)
	waitFor(t, "queue drained", func() bool { return pending(t, q) == 0 })
	if got := s.ids(); !slices.Equal(got, want) {
		t.Fatalf("saved %v, want %v", got, want)
	}
	if value(t, w.saved) != 25 || value(t, w.duplicates) != 0 {
		t.Fatalf("saved=%v duplicates=%v", value(t, w.saved), value(t, w.duplicates))
	}
}

// TestWorkerRetriesFailedSaveInPlace: a failed save is retried by the
// worker holding it (at once, then with backoff), not left for the stale
// reclaim; the batch behind it waits, so the order holds.
func TestWorkerRetriesFailedSaveInPlace(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	s.setFail(fmt.Errorf("pg: %w", memory.ErrUnavailable))
	for i := range 3 {
		enqueue(t, q, exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
	}
	opts := fastWorker()
	opts.StaleAfter = time.Hour // a reclaim would never come in time
	w := NewWorker(q, s, nil, opts)
	mustRunWorker(t, w)
	waitFor(t, "failed saves", func() bool { return value(t, w.failures) >= 3 })
	if got := s.callCount(); got < 2 {
		t.Fatalf("save calls = %d, want the immediate retry", got)
	}
	if pending(t, q) != 3 {
		t.Fatalf("pending = %d: entries acked without a save", pending(t, q))
	}
	s.setFail(nil)
	waitFor(t, "redelivery", func() bool { return pending(t, q) == 0 })
	if got := s.ids(); !slices.Equal(got, []string{"ex0", "ex1", "ex2"}) {
		t.Fatalf("saved %v", got)
	}
}

func TestWorkerPoison(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		saveErr error
	}{
		{name: "not json", payload: []byte("{garbage")},
		{name: "no id", payload: []byte(`{"turn":[]}`)},
		{name: "store rejects as invalid", payload: mustJSON(t, exchange(t, "bad", "hi", "hello")), saveErr: fmt.Errorf("x: %w", memory.ErrInvalid)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, s := newFakeQueue(), newFakeSaver()
			s.setFail(tc.saveErr)
			if err := q.Enqueue(context.Background(), tc.payload); err != nil {
				t.Fatal(err)
			}
			w := NewWorker(q, s, nil, fastWorker())
			mustRunWorker(t, w)
			waitFor(t, "poison acked", func() bool { return pending(t, q) == 0 })
			if value(t, w.poison) != 1 || len(s.ids()) != 0 {
				t.Fatalf("poison=%v saved=%v", value(t, w.poison), s.ids())
			}
		})
	}
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// crashAfterSave commits the save, then fails the first time for each
// exchange, as a worker killed between the save and the ack would.
type crashAfterSave struct {
	Saver
	mu      sync.Mutex
	crashed map[string]bool
}

func (c *crashAfterSave) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := c.Saver.SaveExchange(ctx, ex)
	if err != nil {
		return res, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.crashed[ex.ID] {
		c.crashed[ex.ID] = true
		return memory.SaveResult{}, fmt.Errorf("worker killed before ack")
	}
	return res, nil
}

func TestWorkerKilledBetweenSaveAndAck(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	for i := range 3 {
		enqueue(t, q, exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
	}
	crash := &crashAfterSave{Saver: s, crashed: map[string]bool{}}
	w := NewWorker(q, crash, nil, fastWorker())
	mustRunWorker(t, w)
	waitFor(t, "drained after redelivery", func() bool { return pending(t, q) == 0 })
	if got := s.ids(); !slices.Equal(got, []string{"ex0", "ex1", "ex2"}) {
		t.Fatalf("stored %v, want each once", got)
	}
	if value(t, w.duplicates) != 3 {
		t.Fatalf("duplicates = %v, want 3 redeliveries", value(t, w.duplicates))
	}
}

func TestWorkerStopsOnCancel(t *testing.T) {
	q := newFakeQueue()
	w := NewWorker(q, newFakeSaver(), nil, WorkerOptions{Block: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestCollectorsRegisterTogether(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := mustCapturer(t, newFakeQueue(), newFakeSaver(), nil, Options{})
	w := NewWorker(newFakeQueue(), newFakeSaver(), nil, WorkerOptions{})
	for _, col := range append(c.Collectors(), w.Collectors()...) {
		if err := reg.Register(col); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}
