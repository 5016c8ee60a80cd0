package enrich

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// hungSideModel is an OpenAI-compatible chat endpoint that answers no
// call until released (at the latest when the test ends); called is
// closed at its first call.
func hungSideModel(t *testing.T) (client *openai.Client, called <-chan struct{}, unhang func()) {
	t.Helper()
	ch := make(chan struct{})
	release := make(chan struct{})
	var once, released sync.Once
	unhang = func() { released.Do(func() { close(release) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		once.Do(func() { close(ch) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close) // after release is closed: cleanups run last first
	t.Cleanup(unhang)
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = srv.URL + "/v1"
	return openai.NewClientWithConfig(cfg), ch, unhang
}

// TestHungSideModelHoldsUpNoIndexing: the side model (fact extraction's
// and the compactor's) stops answering. The exchanges stored after it
// hung are still indexed — their turns searchable — while its calls wait
// out their (long) timeouts: indexing never waits for side-model work.
func TestHungSideModelHoldsUpNoIndexing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := mustSQLiteAt(t, filepath.Join(t.TempDir(), "memgate.db"))
	client, called, unhang := hungSideModel(t)
	q := record.NewMemoryQueue(0)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	save := func(i int) {
		ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: time.Now().UTC(),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("My lantern number %d hangs by the red door.", i)}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("Lantern %d noted.", i)}}
		saveForEnrichment(t, st, q, ex)
	}
	const timeout = 5 * time.Minute // each side-model call waits this long
	extractor := recall.NewExtractor(client, st, recall.ExtractorOptions{Model: "side", Timeout: timeout}, nil)
	compactor := New(st, st, NewLLM(client, "side", words), nil, wordCounter{}, Options{
		RecentTokens: 100000, HighWatermark: 0.9, LowWatermark: 0.4, MaxMessages: 2, KeepMessages: 1,
		MaxSummaryTokens: 50, MaxFacts: 100, Timeout: timeout,
	}, nil)
	indexer := recall.NewIndexer(st, recall.NewLocal(16), nil)
	e := newSideEnricher(q, compactor, CoalesceTurns(extractor), indexer, EnrichOptions{HookTimeout: timeout,
		Block: 20 * time.Millisecond, BackoffBase: 10 * time.Millisecond, Interval: 10 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		// The side model answers (an empty reply) once the test is done,
		// so the round it holds ends and the enricher stops.
		unhang()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(time.Minute):
			t.Error("the enricher did not stop")
		}
	}()
	save(0)
	select {
	case <-called:
	case <-time.After(time.Minute):
		t.Fatal("the side model was never called")
	}
	const later = 3
	for i := 1; i <= later; i++ {
		save(i)
	}
	want := 2 * (1 + later) // each exchange's user message and reply
	deadline := time.Now().Add(30 * time.Second)
	for {
		fp, err := st.Footprint(context.Background(), id.Tenant, id.User)
		if err != nil {
			t.Fatal(err)
		}
		if fp.Items >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items indexed while the side model hangs, want %d: indexing waits for the side model", fp.Items, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newSideEnricher wires an Enricher as the gateway does: indexing in the
// index lane, the side-model hooks and the indexing of what they write in
// the side lane.
func newSideEnricher(q record.Queue, compactor, extractor record.Hook, indexer *recall.Indexer, opts EnrichOptions) *Enricher {
	opts.Side = []record.Hook{compactor, extractor, indexer.Derived()}
	return NewEnricher(q, []record.Hook{indexer.Messages()}, nil, opts)
}

// okHook is a hook that does nothing and succeeds.
func okHook() *handedHook {
	return &handedHook{h: record.HookFunc(func(context.Context, []memory.Exchange, []memory.SaveResult) error { return nil }), handed: map[string]int{}}
}

// TestFullSideLaneShedsForRedelivery: the side lane holds at most
// SidePending entries. The index lane indexes every claimed entry; those
// the full side lane cannot take are shed — left claimed and
// unacknowledged, counted — and their redelivery is handed to the side
// lane again without being indexed again. Once the side hooks run, every
// entry is acknowledged: shedding loses nothing, and each exchange is
// indexed once and handed to the side hooks.
func TestFullSideLaneShedsForRedelivery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := record.NewMemoryQueue(0)
	const n = 6
	for i := range n {
		enqueueEnriched(t, q, fmt.Sprintf("c%d", i), fmt.Sprintf("turn %d", i))
	}
	index, side := okHook(), okHook()
	e := NewEnricher(q, []record.Hook{index}, nil, EnrichOptions{Side: []record.Hook{side}, SidePending: 2,
		StaleAfter: 20 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond, BackoffBase: time.Millisecond})
	claim := func(stale time.Duration) []memory.Delivery {
		t.Helper()
		ds, err := q.Claim(ctx, "a", 10, stale, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	indexedOnce := func(when string) {
		t.Helper()
		handed := index.counts()
		if len(handed) != n {
			t.Errorf("%s: %d exchanges indexed, want %d", when, len(handed), n)
		}
		for id, k := range handed {
			if k != 1 {
				t.Errorf("%s: exchange %s indexed %d times, want once", when, id, k)
			}
		}
	}

	e.indexRound(ctx, claim(time.Hour))
	indexedOnce("first claim")
	if got := value(t, e.shed); got != n-2 {
		t.Errorf("%v entries shed by a side lane of 2, want %d", got, n-2)
	}
	if got := value(t, e.sidePending); got != 2 {
		t.Errorf("side lane pending gauge %v, want 2", got)
	}
	if got := pending(t, q); got != n {
		t.Errorf("%d entries unacknowledged, want all %d: none is done with its side hooks", got, n)
	}

	// Redelivered (reclaimed once stale: here at once), the shed entries
	// are offered again, not indexed again; the held ones are left alone.
	e.indexRound(ctx, claim(0))
	indexedOnce("redelivery")
	if got := value(t, e.shed); got != 2*(n-2) {
		t.Errorf("%v entries shed after the redelivery, want %d", got, 2*(n-2))
	}
	if got := value(t, e.sidePending); got != 2 {
		t.Errorf("side lane pending gauge %v after the redelivery, want 2", got)
	}

	// The lanes run: everything is enriched and acknowledged.
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	waitFor(t, "every entry acknowledged", func() bool { return pending(t, q) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	indexedOnce("the end")
	if handed := side.counts(); len(handed) != n {
		t.Errorf("%d exchanges handed to the side hooks, want %d", len(handed), n)
	}
	if got := value(t, e.sidePending); got != 0 {
		t.Errorf("side lane pending gauge %v at the end, want 0", got)
	}
}

// TestStoppedSideLaneLosesNothing: the enricher stops while its side hook
// fails (a side model down) and exchanges wait for the side lane, all of
// them indexed. None is acknowledged: the next run enriches every one.
func TestStoppedSideLaneLosesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := record.NewMemoryQueue(0)
	const n = 5
	for i := range n {
		enqueueEnriched(t, q, fmt.Sprintf("c%d", i), fmt.Sprintf("turn %d", i))
	}
	down := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(1)
	var first sync.Once
	stuck := record.HookFunc(func(ctx context.Context, _ []memory.Exchange, _ []memory.SaveResult) error {
		first.Do(calls.Done)
		select {
		case <-down:
			return fmt.Errorf("side model down")
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	index := okHook()
	opts := EnrichOptions{HookTimeout: time.Minute, Batch: 2, StaleAfter: time.Hour, Block: 10 * time.Millisecond,
		Interval: time.Millisecond, BackoffBase: time.Millisecond}
	o := opts
	o.Side = []record.Hook{stuck}
	e := NewEnricher(q, []record.Hook{index}, nil, o)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	waitFor(t, "every exchange indexed", func() bool { return len(index.counts()) == n })
	calls.Wait() // a side round is under way
	cancel()
	close(down)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pending(t, q); got != n {
		t.Fatalf("%d entries left unacknowledged by the stopped enricher, want all %d", got, n)
	}

	side := okHook()
	o = opts
	o.Side = []record.Hook{side}
	o.StaleAfter = 10 * time.Millisecond // the stopped run's entries are reclaimed
	stop := runEnricher(t, NewEnricher(q, []record.Hook{okHook()}, nil, o))
	waitFor(t, "every entry acknowledged by the next run", func() bool { return pending(t, q) == 0 })
	stop()
	if handed := side.counts(); len(handed) != n {
		t.Errorf("%d exchanges handed to the next run's side hooks, want %d", len(handed), n)
	}
}

// TestSideLaneLeavesErasedUsersOut: a user erased after their exchange
// was stored (and indexed) has it left out of the side lane's rounds:
// acknowledged, never handed to a side hook (a side model), while another
// user's exchange is.
func TestSideLaneLeavesErasedUsersOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := record.NewMemoryQueue(0)
	enqueue := func(user string) string {
		ex := storedExchange(t, record.NewExchangeID(), "I live in Lisbon.", "ok")
		ex.User, ex.At = user, time.Now().Add(-time.Minute)
		p, err := record.EncodeEnrichment(ex, memory.SaveResult{Inserted: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Enqueue(ctx, p); err != nil {
			t.Fatal(err)
		}
		return ex.ID
	}
	gone, kept := enqueue("gone"), enqueue("kept")
	erasedAt := time.Now()
	index, side := okHook(), okHook()
	e := NewEnricher(q, []record.Hook{index}, nil, EnrichOptions{Side: []record.Hook{side},
		Block: 10 * time.Millisecond, Interval: time.Millisecond, BackoffBase: time.Millisecond,
		Erased: func(_ context.Context, _, user string) (time.Time, error) {
			if user == "gone" {
				return erasedAt, nil
			}
			return time.Time{}, nil
		}})
	stop := runEnricher(t, e)
	waitFor(t, "every entry acknowledged", func() bool { return pending(t, q) == 0 })
	stop()
	handed := side.counts()
	if handed[gone] != 0 {
		t.Errorf("the erased user's exchange was handed to the side hooks %d times, want never", handed[gone])
	}
	if handed[kept] != 1 {
		t.Errorf("the other user's exchange was handed to the side hooks %d times, want once", handed[kept])
	}
}
