package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
)

// fakeStore answers every read with nothing; Ping fails while down is set.
type fakeStore struct {
	Store // nil: a method the test does not expect panics
	down  atomic.Bool
}

func (f *fakeStore) Ping(context.Context) error {
	if f.down.Load() {
		return errors.New("down")
	}
	return nil
}

func (f *fakeStore) Conversations(context.Context, string, string) ([]memory.Conversation, error) {
	return []memory.Conversation{{}}, nil
}

// metric reads the engine's collector named name.
func metric(t *testing.T, e *Engine, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartWhileTheStoreIsDown: an engine started while the store is down
// answers as a memory that is down (memory.ErrUnavailable, captures
// dropped and counted, memgate_store_up 0), keeps retrying, and switches
// memory on when the store returns.
func TestStartWhileTheStoreIsDown(t *testing.T) {
	st := &fakeStore{}
	var attempts atomic.Int64
	open := func(context.Context) (*Core, error) {
		if attempts.Add(1) < 3 {
			return nil, fmt.Errorf("%w: connection refused", ErrStoreDown)
		}
		return &Core{Store: st}, nil
	}
	e := New(Options{}, discard())
	if err := e.Start(context.Background(), open); err != nil {
		t.Fatalf("Start with the store down: %v", err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	if e.Connected() {
		t.Fatal("connected before the store answered")
	}
	if _, err := e.Conversations(context.Background(), "t", "u"); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("Conversations while down: %v, want memory.ErrUnavailable", err)
	}
	if _, err := e.Prepare(context.Background(), memory.Request{}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Prepare while down: %v, want ErrNotConnected", err)
	}
	e.Capture(context.Background(), memory.Exchange{})
	if got := metric(t, e, "memgate_capture_dropped_store_down_total"); got != 1 {
		t.Fatalf("dropped captures = %v, want 1", got)
	}
	if err := e.Ping(context.Background()); !errors.Is(err, ErrNotConnected) || metric(t, e, "memgate_store_up") != 0 {
		t.Fatalf("Ping while down: %v, store_up %v", err, metric(t, e, "memgate_store_up"))
	}

	waitFor(t, "the store to be connected", e.Connected)
	if n := attempts.Load(); n != 3 {
		t.Fatalf("open called %d times, want 3", n)
	}
	if got, err := e.Conversations(context.Background(), "t", "u"); err != nil || len(got) != 1 {
		t.Fatalf("Conversations once connected: %v, %v", got, err)
	}
	if err := e.Ping(context.Background()); err != nil || metric(t, e, "memgate_store_up") != 1 {
		t.Fatalf("Ping once connected: %v, store_up %v", err, metric(t, e, "memgate_store_up"))
	}
	st.down.Store(true)
	if err := e.Ping(context.Background()); err == nil || metric(t, e, "memgate_store_up") != 0 {
		t.Fatalf("Ping with the store gone again: %v, store_up %v", err, metric(t, e, "memgate_store_up"))
	}
}

// TestStartFailsOnAConfigurationError: an Open error that is not
// ErrStoreDown fails Start, and nothing is retried.
func TestStartFailsOnAConfigurationError(t *testing.T) {
	bad := errors.New("memory.template: unknown field")
	var attempts atomic.Int64
	e := New(Options{}, discard())
	err := e.Start(context.Background(), func(context.Context) (*Core, error) {
		attempts.Add(1)
		return nil, bad
	})
	if !errors.Is(err, bad) {
		t.Fatalf("Start: %v, want the configuration error", err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("open called %d times, want 1", n)
	}
}

// TestRecallOffAnswersUnavailable: with recall off the recall calls answer
// memory.ErrUnavailable even when the store is connected.
func TestRecallOffAnswersUnavailable(t *testing.T) {
	e := New(Options{}, discard())
	e.Use(&Core{Store: &fakeStore{}})
	if _, err := e.Facts(context.Background(), "t", "u", false); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("Facts with recall off: %v", err)
	}
	if _, err := e.SearchIn(context.Background(), "t", "u", "", "q", 3); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("SearchIn with recall off: %v", err)
	}
}
