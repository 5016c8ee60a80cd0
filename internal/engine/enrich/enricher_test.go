package enrich

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// recordingHook records each call's exchanges, per call.
type recordingHook struct {
	mu    sync.Mutex
	calls [][]string // turn texts per call
	fail  int        // fail this many calls first
}

func (h *recordingHook) AfterSaveBatch(_ context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail > 0 {
		h.fail--
		return errors.New("model down")
	}
	var texts []string
	for _, ex := range exs {
		for _, m := range ex.Turn {
			texts = append(texts, ex.Conversation+":"+m.Content)
		}
	}
	h.calls = append(h.calls, texts)
	return nil
}

func (h *recordingHook) snapshot() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]string(nil), h.calls...)
}

func enqueueEnriched(tb testing.TB, q record.Queue, conv, text string) {
	tb.Helper()
	ex := storedExchange(tb, record.NewExchangeID(), text, "ok")
	ex.Conversation = conv
	p, err := record.EncodeEnrichment(ex, memory.SaveResult{Inserted: 2})
	if err != nil {
		tb.Fatal(err)
	}
	if err := q.Enqueue(context.Background(), p); err != nil {
		tb.Fatal(err)
	}
}

// TestEnricherCoalescesABacklog: a backlog is enriched in rounds, each
// conversation's turns together and in order, and extraction (through
// CoalesceTurns) runs once per conversation per round.
func TestEnricherCoalescesABacklog(t *testing.T) {
	q := record.NewMemoryQueue(0)
	for i := range 6 {
		enqueueEnriched(t, q, "a", fmt.Sprint("a", i))
		enqueueEnriched(t, q, "b", fmt.Sprint("b", i))
	}
	all, extract := &recordingHook{}, &recordingHook{}
	var perExchange int
	var mu sync.Mutex
	counting := record.EachExchange(func(context.Context, memory.Exchange, memory.SaveResult) error {
		mu.Lock()
		perExchange++
		mu.Unlock()
		return nil
	})
	e := NewEnricher(q, []record.Hook{all, CoalesceTurns(extract), CoalesceTurns(counting)}, nil, EnrichOptions{Block: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "backlog enriched", func() bool { return pending(t, q) == 0 })

	calls := all.snapshot()
	if len(calls) != 1 {
		t.Fatalf("batch hook called %d times, want once for the whole backlog", len(calls))
	}
	want := "a:a0 a:a1 a:a2 a:a3 a:a4 a:a5 b:b0 b:b1 b:b2 b:b3 b:b4 b:b5"
	if got := strings.Join(calls[0], " "); got != want {
		t.Fatalf("batch hook saw %q, want %q", got, want)
	}
	ext := extract.snapshot()
	if len(ext) != 1 || strings.Join(ext[0], " ") != want {
		t.Fatalf("coalesced hook saw %v", ext)
	}
	mu.Lock()
	defer mu.Unlock()
	if perExchange != 2 {
		t.Fatalf("per-exchange hook ran %d times, want 2 (one per conversation)", perExchange)
	}
	if value(t, e.coalesced) != 10 || value(t, e.enriched) != 12 {
		t.Fatalf("coalesced = %v enriched = %v", value(t, e.coalesced), value(t, e.enriched))
	}
	if n := histCount(t, e.lag); n != 12 {
		t.Fatalf("lag observations = %d, want 12", n)
	}
}

// TestEnricherRetriesThenGivesUp: failing hooks are retried in place, then
// the round is acknowledged anyway, so enrichment never stalls.
func TestEnricherRetriesThenGivesUp(t *testing.T) {
	q := record.NewMemoryQueue(0)
	enqueueEnriched(t, q, "a", "x")
	h := &recordingHook{fail: 1}
	e := NewEnricher(q, []record.Hook{h}, nil, EnrichOptions{Block: 5 * time.Millisecond, BackoffBase: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	waitFor(t, "retried", func() bool { return pending(t, q) == 0 })
	if len(h.snapshot()) != 1 {
		t.Fatal("hook not retried after its failure")
	}
	h.mu.Lock()
	h.fail = 100
	h.mu.Unlock()
	enqueueEnriched(t, q, "a", "y")
	waitFor(t, "given up", func() bool { return pending(t, q) == 0 })
	cancel()
	<-done
	if value(t, e.failures) < 3 {
		t.Fatalf("failures = %v", value(t, e.failures))
	}
}

// pacedHook records when each round began and how many exchanges it held,
// and takes work long in each.
type pacedHook struct {
	mu     sync.Mutex
	starts []time.Time
	sizes  []int
	work   time.Duration
}

func (h *pacedHook) AfterSaveBatch(_ context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
	h.mu.Lock()
	h.starts, h.sizes = append(h.starts, time.Now()), append(h.sizes, len(exs))
	h.mu.Unlock()
	time.Sleep(h.work)
	return nil
}

// TestEnricherPacesItsRounds: rounds start at least Interval apart, and a
// round that took d is followed by a pause of at least d(1/Share - 1), so
// turns arriving meanwhile wait for one fuller round instead of the
// enricher taking the machine.
func TestEnricherPacesItsRounds(t *testing.T) {
	q := record.NewMemoryQueue(0)
	h := &pacedHook{work: 30 * time.Millisecond}
	const interval = 50 * time.Millisecond
	e := NewEnricher(q, []record.Hook{h}, nil, EnrichOptions{Block: 5 * time.Millisecond, Interval: interval, Share: 0.25})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 40 {
		enqueueEnriched(t, q, fmt.Sprint("c", i%4), fmt.Sprint("t", i))
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, "all enriched", func() bool { return pending(t, q) == 0 })
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for i, n := range h.sizes {
		total += n
		if i == 0 {
			continue
		}
		// Each round took at least work; at Share 0.25 the next begins at
		// least 4×work after it began (the larger of that and Interval).
		if gap := h.starts[i].Sub(h.starts[i-1]); gap < max(interval, 4*h.work) {
			t.Fatalf("round %d began %v after the previous one, want at least %v", i, gap, max(interval, 4*h.work))
		}
	}
	if total != 40 {
		t.Fatalf("enriched %d exchanges, want 40", total)
	}
	if len(h.sizes) >= 40 {
		t.Fatalf("%d rounds for 40 exchanges: nothing was gathered", len(h.sizes))
	}
}

// TestImportedEnrichmentLagRunsFromCapture: the enrichment of an exchange
// said long ago (imported) is timed from its capture, not from when it was
// said, so a migration does not report years of lag.
func TestImportedEnrichmentLagRunsFromCapture(t *testing.T) {
	eq := record.NewMemoryQueue(0)
	c := record.New(nil, countingSaver{}, nil, nil, record.Options{Enrich: eq})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = c.Close(ctx)
	})
	var ran atomic.Int64
	e := NewEnricher(eq, []record.Hook{record.EachExchange(func(context.Context, memory.Exchange, memory.SaveResult) error {
		ran.Add(1)
		return nil
	})}, nil, EnrichOptions{Block: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	ex := storedExchange(t, "im-old", "q", "a")
	ex.At = time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := c.Import(context.Background(), []memory.Exchange{ex}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hook to run", func() bool { return histCount(t, e.lag) == 1 })
	var d dto.Metric
	if err := e.lag.Write(&d); err != nil {
		t.Fatal(err)
	}
	if sum := d.Histogram.GetSampleSum(); sum > time.Minute.Seconds() {
		t.Fatalf("enrichment lag of an imported exchange %.0fs, want it timed from its capture", sum)
	}
}

// TestEnricherDoesIdleWorkWhenNothingWaits: the idle work (the indexer's
// backfill) runs only once the queue is drained, again while it reports
// work done, and never keeps a new entry from being enriched; a failure
// of it is counted.
func TestEnricherDoesIdleWorkWhenNothingWaits(t *testing.T) {
	q := record.NewMemoryQueue(0)
	for i := range 3 {
		enqueueEnriched(t, q, "a", fmt.Sprint("a", i))
	}
	h := &recordingHook{}
	var (
		calls, early atomic.Int32
		fail         atomic.Bool
	)
	const work = 5 // batches of idle work to do
	idle := func(context.Context) (int, error) {
		n := calls.Add(1)
		if len(h.snapshot()) == 0 {
			early.Add(1)
		}
		if fail.Load() {
			return 0, errors.New("encoder down")
		}
		if n <= work {
			return 1, nil
		}
		return 0, nil
	}
	e := NewEnricher(q, []record.Hook{h}, nil, EnrichOptions{Block: 40 * time.Millisecond, Idle: idle})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "idle work done", func() bool { return calls.Load() > work })
	if early.Load() > 0 {
		t.Fatalf("idle work ran %d times before the queued exchanges were enriched", early.Load())
	}
	enqueueEnriched(t, q, "a", "later")
	waitFor(t, "an exchange queued after the idle work enriched", func() bool { return pending(t, q) == 0 && len(h.snapshot()) == 2 })
	fail.Store(true)
	waitFor(t, "idle failure counted", func() bool { return value(t, e.failures) >= 1 })
}
