package enrich

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// Several processes on one SQLite file (`gateway serve` and `gateway
// worker`, two gateways) each run an Enricher over the file's enrichment
// outbox. Two Stores on one file in a test stand in for them.

// mustSQLiteAt opens a Store on the file at path, as one process would.
func mustSQLiteAt(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// watchedOutbox is a process's enrichment outbox that counts the claims
// and lease calls its Enricher makes once armed: each one, made after
// another process's claimed entries went stale, would reclaim them
// without a lease.
type watchedOutbox struct {
	*sqlite.Outbox
	callWatch
}

func (o *watchedOutbox) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	o.note()
	return o.Outbox.Claim(ctx, consumer, max, staleAfter, block)
}

func (o *watchedOutbox) Lease(ctx context.Context, consumer string, ttl time.Duration) (bool, bool, error) {
	o.note()
	return o.Outbox.Lease(ctx, consumer, ttl)
}

// callWatch counts the calls a watched queue or outbox notes once armed.
type callWatch struct {
	armed atomic.Bool
	calls atomic.Int64
}

// note counts a call if w is armed.
func (w *callWatch) note() {
	if w.armed.Load() {
		w.calls.Add(1)
	}
}

// sqliteEnrichOptions returns o as the gateway wires an Enricher over a
// SQLite store's enrichment outbox ob: with the outbox's lease.
func sqliteEnrichOptions(o EnrichOptions, ob *watchedOutbox) EnrichOptions {
	o.Lease = ob
	return o
}

// gate holds the first caller of wait until release is closed.
type gate struct {
	entered chan struct{} // closed when the first caller arrives
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

// wait blocks the first caller until release is closed.
func (g *gate) wait() {
	first := false
	g.once.Do(func() { first = true; close(g.entered) })
	if first {
		<-g.release
	}
}

// reached waits until the first caller arrived.
func (g *gate) reached(tb testing.TB, what string) {
	tb.Helper()
	select {
	case <-g.entered:
	case <-time.After(60 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
	}
}

// gateHook records every exchange it sees; its first round waits at its gate.
type gateHook struct {
	*gate
	mu   sync.Mutex
	seen []string
}

func newGateHook() *gateHook { return &gateHook{gate: newGate()} }

func (h *gateHook) AfterSaveBatch(_ context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
	h.mu.Lock()
	for _, ex := range exs {
		h.seen = append(h.seen, ex.ID)
	}
	h.mu.Unlock()
	h.wait()
	return nil
}

func (h *gateHook) saw() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// runEnricher runs e until the test ends or stop is called; stop returns
// once Run did.
func runEnricher(tb testing.TB, e *Enricher) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	stop = func() { cancel(); <-done }
	tb.Cleanup(stop)
	return stop
}

// TestSQLiteTwoEnrichersEnrichOnce: two processes enrich from one SQLite
// file. Process A claims a stored exchange ("I live in Lisbon.") and its
// round runs long (a slow model), past StaleAfter. Process B must not take
// the exchange over and enrich it again: the user's pinned city would be
// counted as stated twice (mentions 2, confidence raised), and the model
// paid twice. One process enriches at a time; the exchange is enriched
// once.
func TestSQLiteTwoEnrichersEnrichOnce(t *testing.T) {
	for _, tt := range []struct {
		name     string
		leaseTTL time.Duration // 0: the default
	}{
		{"past StaleAfter", 0},
		// A's round outlasts its lease's TTL three times over: A renews
		// it while the round runs. The TTL is long enough that a busy
		// machine's scheduling pauses (renewals come every third or
		// quarter of it) do not let the lease lapse: a lapsed lease is
		// rightly taken over, and this test would then fail.
		{"past the lease's TTL", time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) { testTwoEnrichersEnrichOnce(t, tt.leaseTTL) })
	}
}

func testTwoEnrichersEnrichOnce(t *testing.T, leaseTTL time.Duration) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memgate.db")
	sa, sb := mustSQLiteAt(t, path), mustSQLiteAt(t, path)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: time.Now().UTC(),
		Turn: []memory.Message{{Role: "user", Content: "I live in Lisbon."}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	saveForEnrichment(t, sa, sa.EnrichOutbox(), ex)

	compactor := func(st *sqlite.Store) *Compactor {
		return New(st, st, nil, NewExtractive(wordCounter{}.Text2), wordCounter{}, Options{
			RecentTokens: 100000, HighWatermark: 0.9, LowWatermark: 0.4, MaxMessages: 1000, KeepMessages: 500,
			MaxSummaryTokens: 50, MaxFacts: 100,
		}, nil)
	}
	opts := EnrichOptions{StaleAfter: 50 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	obA, obB := &watchedOutbox{Outbox: sa.EnrichOutbox()}, &watchedOutbox{Outbox: sb.EnrichOutbox()}
	gateA, gateB := newGateHook(), newGateHook()
	close(gateB.release)

	oa := sqliteEnrichOptions(opts, obA)
	oa.Consumer = "a"
	ea := NewEnricher(obA, []record.Hook{compactor(sa), gateA}, nil, oa)
	ob := sqliteEnrichOptions(opts, obB)
	ob.Consumer = "b"
	eb := NewEnricher(obB, []record.Hook{compactor(sb), gateB}, nil, ob)
	if leaseTTL > 0 {
		ea.leaseTTL, eb.leaseTTL = leaseTTL, leaseTTL
	}
	runEnricher(t, ea)
	gateA.reached(t, "process A to enrich the exchange")
	// A's claim is older than StaleAfter from here on, and its round has
	// outlasted the lease's TTL: B's claims, without a lease, reclaim it;
	// with a lease A did not renew, B takes the lease and reclaims it.
	time.Sleep(max(opts.StaleAfter, 3*leaseTTL))
	obB.armed.Store(true)
	runEnricher(t, eb)
	waitFor(t, "process B to enrich the exchange again, or to try 5 times", func() bool {
		return gateB.saw() > 0 || obB.calls.Load() >= 5
	})
	close(gateA.release)
	waitFor(t, "the outbox drained", func() bool {
		n, err := sa.EnrichOutbox().Pending(ctx)
		return err == nil && n == 0
	})

	if n := gateB.saw(); n != 0 {
		t.Errorf("process B enriched %d exchanges A was enriching", n)
	}
	facts, err := sa.Facts(ctx, id.Tenant, id.User, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0].Value != "Lisbon" || facts[0].Mentions != 1 {
		t.Fatalf("facts = %+v, want the city Lisbon stated once", facts)
	}
}

// billedSummarizer is a side model both processes call: it counts the
// calls for each summary version, and the first call waits at its gate (a
// slow model).
type billedSummarizer struct {
	*gate
	mu    sync.Mutex
	calls map[int]int // by the version the summary would be
}

func (s *billedSummarizer) Summarize(_ context.Context, in Input) (Output, error) {
	version := 1
	if in.Previous != nil {
		version = in.Previous.Version + 1
	}
	s.mu.Lock()
	s.calls[version]++
	s.mu.Unlock()
	s.wait()
	return Output{Summary: "They talked about lanterns."}, nil
}

func (s *billedSummarizer) billed() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// TestSQLiteTwoEnrichersCompactOnce: two processes enrich from one SQLite
// file. Process A's round compacts a long conversation and waits on a
// slow side model; meanwhile the conversation's next turn is stored and
// queued. Process B must not enrich it alongside: it would compact the
// same conversation from the same state, paying the model for a summary
// version A is writing, and throw one of them away. Each version is
// summarised once.
func TestSQLiteTwoEnrichersCompactOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memgate.db")
	sa, sb := mustSQLiteAt(t, path), mustSQLiteAt(t, path)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	at := time.Now().Add(-time.Hour).UTC()
	turn := 0
	enqueue := func() {
		t.Helper()
		turn++
		ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: at.Add(time.Duration(turn) * time.Minute),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("We hang lantern number %d.", turn)}},
			Reply: memory.Message{Role: "assistant", Content: "Nice."}}
		saveForEnrichment(t, sa, sa.EnrichOutbox(), ex)
	}
	for range 4 {
		enqueue()
	}
	model := &billedSummarizer{gate: newGate(), calls: map[int]int{}}
	compactor := func(st *sqlite.Store) *Compactor {
		return New(st, st, nil, model, wordCounter{}, Options{
			RecentTokens: 100000, HighWatermark: 0.9, LowWatermark: 0.4, MaxMessages: 4, KeepMessages: 2,
			MaxSummaryTokens: 50, MaxFacts: 100,
		}, nil)
	}
	opts := EnrichOptions{StaleAfter: time.Hour, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	obA, obB := &watchedOutbox{Outbox: sa.EnrichOutbox()}, &watchedOutbox{Outbox: sb.EnrichOutbox()}

	oa := sqliteEnrichOptions(opts, obA)
	oa.Consumer = "a"
	runEnricher(t, NewEnricher(obA, []record.Hook{compactor(sa)}, nil, oa))
	model.reached(t, "process A to compact the conversation")
	ob := sqliteEnrichOptions(opts, obB)
	ob.Consumer = "b"
	runEnricher(t, NewEnricher(obB, []record.Hook{compactor(sb)}, nil, ob))
	enqueue()
	obB.armed.Store(true)
	waitFor(t, "process B to compact the conversation too, or to try 5 times", func() bool {
		return model.billed()[1] > 1 || obB.calls.Load() >= 5
	})
	close(model.release)
	waitFor(t, "the outbox drained", func() bool {
		n, err := sa.EnrichOutbox().Pending(ctx)
		return err == nil && n == 0
	})
	for version, n := range model.billed() {
		if n != 1 {
			t.Errorf("summary version %d was asked of the model %d times, want once", version, n)
		}
	}
	if sum, err := sa.LatestSummary(ctx, id); err != nil || sum.Version < 1 {
		t.Fatalf("latest summary = %+v, %v; want the conversation compacted", sum, err)
	}
}

// TestSQLiteStoppedEnricherGivesUpItsLease: an enricher that stops gives
// its lease up, so another process's enricher takes over at once rather
// than after the lease ran out; the capture outbox's lease is another one.
func TestSQLiteStoppedEnricherGivesUpItsLease(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memgate.db")
	sa, sb := mustSQLiteAt(t, path), mustSQLiteAt(t, path)
	ob := &watchedOutbox{Outbox: sa.EnrichOutbox()}
	stop := runEnricher(t, NewEnricher(ob, nil, nil, sqliteEnrichOptions(EnrichOptions{Consumer: "a", Block: 10 * time.Millisecond}, ob)))
	// A claims only while it holds the lease.
	enqueueEnriched(t, sa.EnrichOutbox(), "c", "hello")
	waitFor(t, "the enricher to enrich", func() bool {
		n, err := sa.EnrichOutbox().Pending(ctx)
		return err == nil && n == 0
	})
	if held, _, err := sb.EnrichOutbox().Lease(ctx, "b", time.Minute); err != nil || held {
		t.Fatalf("process B took the lease the running enricher holds (%v)", err)
	}
	// The capture outbox's lease is another one, free all along.
	if held, _, err := sb.Outbox().Lease(ctx, "b", time.Minute); err != nil || !held {
		t.Fatalf("capture outbox lease: held %v, %v", held, err)
	}
	stop()
	held, taken, err := sb.EnrichOutbox().Lease(ctx, "b", time.Minute)
	if err != nil || !held || !taken {
		t.Fatalf("after the enricher stopped, Lease = held %v, taken %v, %v; want it taken over", held, taken, err)
	}
}

// exchangeSaver is the store a test saves exchanges in.
type exchangeSaver interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
}

// saveForEnrichment stores ex in st and queues it on the enrichment queue
// q, as a gateway's capture does.
func saveForEnrichment(t *testing.T, st exchangeSaver, q record.Queue, ex memory.Exchange) {
	t.Helper()
	if err := q.Enqueue(context.Background(), savedEnrichment(t, st, ex)); err != nil {
		t.Fatal(err)
	}
}

// savedEnrichment stores ex in st and returns its enrichment queue entry,
// as a gateway's capture makes it.
func savedEnrichment(t *testing.T, st exchangeSaver, ex memory.Exchange) []byte {
	t.Helper()
	res, err := st.SaveExchange(context.Background(), ex)
	if err != nil {
		t.Fatal(err)
	}
	p, err := record.EncodeEnrichment(ex, res)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
