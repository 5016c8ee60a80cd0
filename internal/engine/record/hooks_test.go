package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// resultSaver returns a fixed result.
type resultSaver struct{ res memory.SaveResult }

func (s resultSaver) SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error) {
	return s.res, nil
}

func TestWithHooks(t *testing.T) {
	boom := errors.New("embedder down")
	tests := []struct {
		name    string
		res     memory.SaveResult
		hookErr error
		calls   int
		wantErr bool
	}{
		{"stored", memory.SaveResult{Inserted: 2}, nil, 2, false},
		{"duplicate runs hooks again", memory.SaveResult{Duplicate: true}, nil, 2, false},
		{"dropped runs none", memory.SaveResult{Dropped: true}, nil, 0, false},
		{"hook error", memory.SaveResult{Inserted: 2}, boom, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			h := EachExchange(func(context.Context, memory.Exchange, memory.SaveResult) error { calls++; return tt.hookErr })
			_, err := WithHooks(resultSaver{tt.res}, h, h).SaveExchange(context.Background(), memory.Exchange{ID: "x"})
			if calls != tt.calls {
				t.Fatalf("hook calls = %d, want %d", calls, tt.calls)
			}
			if tt.wantErr != (err != nil) || tt.wantErr && (!errors.Is(err, ErrHook) || !errors.Is(err, boom)) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestRunHooksErasure: a hook's report of an erasure is no failure when it
// can only be about the erased user — from one exchange (EachExchange) or
// from a batch of one user — and a failure in a batch of several users,
// so the batch is redelivered; every hook runs even after one failed.
func TestRunHooksErasure(t *testing.T) {
	one := []memory.Exchange{
		{ID: "a1", Identity: memory.Identity{Tenant: "t", User: "ann", Conversation: "c"}},
		{ID: "a2", Identity: memory.Identity{Tenant: "t", User: "ann", Conversation: "c"}},
	}
	several := append(slices.Clone(one), memory.Exchange{ID: "b1", Identity: memory.Identity{Tenant: "t", User: "bob", Conversation: "c"}})
	erased := fmt.Errorf("save fact: %w", memory.ErrErased)
	boom := errors.New("store down")
	batch := func(err error) Hook {
		return HookFunc(func(context.Context, []memory.Exchange, []memory.SaveResult) error { return err })
	}
	each := func(err error) Hook {
		return EachExchange(func(_ context.Context, ex memory.Exchange, _ memory.SaveResult) error {
			if ex.User == "ann" {
				return err
			}
			return nil
		})
	}
	tests := []struct {
		name     string
		hook     Hook
		exs      []memory.Exchange
		wantErrs []error // nil: RunHooks succeeds
	}{
		{"batch of one user, erased", batch(erased), one, nil},
		{"batch of several users, erased", batch(erased), several, []error{ErrHook, memory.ErrErased}},
		{"per exchange, several users, erased", each(erased), several, nil},
		{"per exchange, several users, failed", each(boom), several, []error{ErrHook, boom}},
		{"batch of one user, failed", batch(boom), one, []error{ErrHook, boom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var after int
			last := HookFunc(func(_ context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
				after += len(exs)
				return nil
			})
			err := RunHooks(context.Background(), []Hook{tt.hook, last}, tt.exs, make([]memory.SaveResult, len(tt.exs)))
			if after != len(tt.exs) {
				t.Fatalf("the hook after saw %d exchanges, want %d", after, len(tt.exs))
			}
			if (err == nil) != (tt.wantErrs == nil) {
				t.Fatalf("RunHooks = %v, want errors %v", err, tt.wantErrs)
			}
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Fatalf("RunHooks = %v, want it to be %v", err, want)
				}
			}
		})
	}
}

// TestWorkerGivesUpOnFailingHook: an entry whose hook keeps failing is
// redelivered, then acknowledged after MaxHookAttempts.
func TestWorkerGivesUpOnFailingHook(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	var calls atomic.Int32
	failing := EachExchange(func(context.Context, memory.Exchange, memory.SaveResult) error {
		calls.Add(1)
		return errors.New("always")
	})
	payload, _ := json.Marshal(exchange(t, "ex1", "hi", "hello"))
	if err := q.Enqueue(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
	w := NewWorker(q, WithHooks(s, failing), nil, WorkerOptions{StaleAfter: time.Millisecond, Block: 5 * time.Millisecond, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go w.Run(ctx)
	for {
		n, _ := q.Pending(ctx)
		if n == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("entry never acknowledged")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if got := calls.Load(); got != MaxHookAttempts {
		t.Fatalf("hook ran %d times, want %d", got, MaxHookAttempts)
	}
}

// batchRecorder is a Hook that records the batches and exchanges it
// ran over, failing while fail returns an error.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]string
	dups    map[string]int
	fail    func(ids []string) error
}

func (r *batchRecorder) AfterSaveBatch(_ context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for i, ex := range exs {
		ids = append(ids, ex.ID)
		if results[i].Duplicate {
			r.dups[ex.ID]++
		}
	}
	if r.fail != nil {
		if err := r.fail(ids); err != nil {
			return err
		}
	}
	r.batches = append(r.batches, ids)
	return nil
}

// done returns the exchange ids of the batches that succeeded, in order.
func (r *batchRecorder) done() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.batches {
		out = append(out, b...)
	}
	return out
}

// TestWorkerRunsHooksPerBatch: the worker's hooks run once per claimed
// batch over its stored exchanges in order, per-exchange hooks (EachExchange) once per exchange,
// in the configured order, before the batch is acknowledged.
func TestWorkerRunsHooksPerBatch(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	var want []string
	for i := range 10 {
		id := fmt.Sprintf("ex%02d", i)
		want = append(want, id)
		enqueue(t, q, exchange(t, id, "hi", "hello"))
	}
	var (
		mu    sync.Mutex
		trace []string
	)
	plain := EachExchange(func(_ context.Context, ex memory.Exchange, _ memory.SaveResult) error {
		mu.Lock()
		trace = append(trace, "plain:"+ex.ID)
		mu.Unlock()
		return nil
	})
	rec := &batchRecorder{dups: map[string]int{}, fail: func(ids []string) error {
		mu.Lock()
		trace = append(trace, "batch:"+strings.Join(ids, ","))
		mu.Unlock()
		return nil
	}}
	opts := fastWorker()
	opts.Hooks = []Hook{plain, rec}
	// Nothing here needs a reclaim: a long lease keeps a slow claimed batch
	// (-race on a busy machine) from being delivered a second time.
	opts.StaleAfter = time.Minute
	w := NewWorker(q, s, nil, opts)
	mustRunWorker(t, w)
	waitFor(t, "drained", func() bool { return pending(t, q) == 0 })
	if got := rec.done(); !slices.Equal(got, want) {
		t.Fatalf("batch hook saw %v, want %v once each in order", got, want)
	}
	rec.mu.Lock()
	batches := len(rec.batches)
	rec.mu.Unlock()
	if batches != 3 { // 10 entries, batches of 4
		t.Fatalf("batch hook ran %d times, want 3 (once per claimed batch)", batches)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "plain:ex00 plain:ex01 plain:ex02 plain:ex03 batch:ex00,ex01,ex02,ex03"; strings.Join(trace[:5], " ") != want {
		t.Fatalf("first batch traced %v, want %s", trace[:5], want)
	}
}

// TestWorkerKilledBetweenSaveAndHooks: a worker that dies after storing a
// batch but before its hooks ran leaves the entries to another worker,
// which finds them stored (duplicates) and runs the hooks: every exchange
// is stored once and hooked.
func TestWorkerKilledBetweenSaveAndHooks(t *testing.T) {
	store := mustSQLite(t)
	for i := range 6 {
		enqueue(t, store.Outbox(), exchange(t, fmt.Sprint("req-", i), fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	ctx, kill := context.WithCancel(context.Background())
	killed := make(chan struct{})
	dying := &batchRecorder{dups: map[string]int{}, fail: func([]string) error {
		kill() // the process dies while the hooks run
		select {
		case <-killed:
		default:
			close(killed)
		}
		return ctx.Err()
	}}
	opts := fastWorker()
	// Long enough that the survivor does not reclaim its own entries while
	// they wait for its hook stage (under -race on a busy machine, which
	// may pause it for a second or so).
	opts.StaleAfter = 2 * time.Second
	opts.Consumer, opts.Hooks = "dies", []Hook{dying}
	first := NewWorker(store.Outbox(), store, nil, workerWithStore(opts, store))
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-killed
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if value(t, first.saved) == 0 {
		t.Fatal("the first worker stored nothing before dying")
	}
	if n := outboxPending(t, store); n != 6 {
		t.Fatalf("outbox pending = %d after the kill, want all 6 (nothing acknowledged before the hooks ran)", n)
	}

	rec := &batchRecorder{dups: map[string]int{}}
	opts.Consumer, opts.Hooks = "survivor", []Hook{rec}
	second := NewWorker(store.Outbox(), store, nil, workerWithStore(opts, store))
	mustRunWorker(t, second)
	waitFor(t, "outbox drained by the survivor", func() bool { return outboxPending(t, store) == 0 })
	// Entries the first worker never claimed may be hooked before its stale
	// ones are reclaimed: each once, in any order.
	want := []string{"req-0", "req-1", "req-2", "req-3", "req-4", "req-5"}
	if got := slices.Sorted(slices.Values(rec.done())); !slices.Equal(got, want) {
		t.Fatalf("hooks ran for %v, want %v once each", got, want)
	}
	msgs, err := store.Recent(context.Background(), memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	if want := "q0 a0 q1 a1 q2 a2 q3 a3 q4 a4 q5 a5"; strings.Join(got, " ") != want {
		t.Fatalf("stored %q, want %q (each once)", strings.Join(got, " "), want)
	}
	stored := int(value(t, first.saved))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id, n := range rec.dups {
		if n != 1 {
			t.Fatalf("%s hooked as a duplicate %d times", id, n)
		}
	}
	if len(rec.dups) != stored {
		t.Fatalf("survivor saw %d duplicates, want the %d the first worker stored", len(rec.dups), stored)
	}
}

// TestWorkerGivesUpOnFailingBatchHook: entries whose worker hooks keep
// failing are redelivered, then acknowledged after MaxHookAttempts.
func TestWorkerGivesUpOnFailingBatchHook(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	var calls atomic.Int32
	rec := &batchRecorder{dups: map[string]int{}, fail: func([]string) error { calls.Add(1); return errors.New("always") }}
	enqueue(t, q, exchange(t, "ex1", "hi", "hello"))
	// A lease long enough that a busy machine, pausing for a second or
	// so, never reclaims an entry while its delivery is still running
	// (which would count two give-ups for one entry): redelivery follows
	// each failed attempt, once the lease ran out.
	w := NewWorker(q, s, nil, WorkerOptions{StaleAfter: 1500 * time.Millisecond, Block: 5 * time.Millisecond,
		BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, Hooks: []Hook{rec}})
	mustRunWorker(t, w)
	waitFor(t, "acknowledged", func() bool { return pending(t, q) == 0 })
	if got := calls.Load(); got != MaxHookAttempts {
		t.Fatalf("hook ran %d times, want %d", got, MaxHookAttempts)
	}
	if got := value(t, w.failures.WithLabelValues("hook_gave_up")); got != 1 {
		t.Fatalf("hook_gave_up = %v, want 1", got)
	}
	if got := s.ids(); !slices.Equal(got, []string{"ex1"}) {
		t.Fatalf("stored %v, want ex1 once", got)
	}
}

// TestWorkerHookDelay: with a HookDelay, exchanges are readable as soon as
// they are stored, and the hooks run once over those stored within the
// delay; a worker stopping runs the hooks of what it holds.
func TestWorkerHookDelay(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	rec := &batchRecorder{dups: map[string]int{}}
	opts := fastWorker()
	opts.Batch, opts.StaleAfter, opts.HookDelay, opts.Hooks = 32, time.Minute, time.Second, []Hook{rec}
	w := NewWorker(q, s, nil, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	start := time.Now()
	enqueue(t, q, exchange(t, "ex0", "hi", "hello"))
	waitFor(t, "ex0 stored", func() bool { return len(s.ids()) == 1 })
	enqueue(t, q, exchange(t, "ex1", "hi", "hello"))
	enqueue(t, q, exchange(t, "ex2", "hi", "hello"))
	waitFor(t, "all stored", func() bool { return len(s.ids()) == 3 })
	if got := rec.done(); len(got) != 0 && time.Since(start) < time.Second {
		t.Fatalf("hooks ran over %v before the delay passed", got)
	}
	waitFor(t, "hooked and acknowledged", func() bool { return pending(t, q) == 0 })
	if time.Since(start) < time.Second {
		t.Fatalf("acknowledged after %v, before the hooks' delay", time.Since(start))
	}
	rec.mu.Lock()
	batches := slices.Clone(rec.batches)
	rec.mu.Unlock()
	if len(batches) != 1 || !slices.Equal(batches[0], []string{"ex0", "ex1", "ex2"}) {
		t.Fatalf("hook batches %v, want one of ex0..ex2", batches)
	}

	enqueue(t, q, exchange(t, "ex3", "hi", "hello"))
	waitFor(t, "ex3 stored", func() bool { return len(s.ids()) == 4 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred receive
	if got := rec.done(); !slices.Equal(got, []string{"ex0", "ex1", "ex2", "ex3"}) {
		t.Fatalf("hooks ran over %v; a stopping worker must run the hooks of what it holds", got)
	}
	if n := pending(t, q); n != 0 {
		t.Fatalf("pending = %d after the stop, want 0", n)
	}
}

// TestGuarded: the hooks' results carry, for each exchange stored, the
// earliest At among its user's exchanges of the batch (now for one without
// At), per tenant and user; a dropped exchange carries none and counts for
// none.
func TestGuarded(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(24 * time.Hour)
	ex := func(tenant, user string, at time.Time) memory.Exchange {
		return memory.Exchange{Identity: memory.Identity{Tenant: tenant, User: user, Conversation: "c"}, At: at}
	}
	exs := []memory.Exchange{
		ex("t", "u", t0.Add(time.Minute)),
		ex("t", "u", t0), // the earliest wins
		ex("t", "u", t0.Add(time.Hour)),
		ex("t", "v", time.Time{}),           // no At: guarded from now
		ex("t2", "u", t0.Add(2*time.Hour)),  // another tenant's user
		ex("t", "w", t0.Add(-time.Hour)),    // dropped: no guard, and ...
		ex("t", "w", t0.Add(3*time.Hour)),   // ... not counted for the others
		ex("t", "u", t0.Add(-48*time.Hour)), // dropped
	}
	results := make([]memory.SaveResult, len(exs))
	results[5].Dropped, results[7].Dropped = true, true
	got := guarded(exs, results, now)
	want := []time.Time{t0, t0, t0, now, t0.Add(2 * time.Hour), {}, t0.Add(3 * time.Hour), {}}
	for i := range exs {
		if !got[i].GuardSince.Equal(want[i]) {
			t.Errorf("exchange %d (%s/%s at %v): GuardSince %v, want %v", i, exs[i].Tenant, exs[i].User, exs[i].At, got[i].GuardSince, want[i])
		}
	}
	for i := range results {
		if !results[i].GuardSince.IsZero() {
			t.Fatalf("guarded wrote into its argument: result %d", i)
		}
	}
}
