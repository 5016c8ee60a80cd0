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

// newSideEnricher wires an Enricher as the gateway does.
func newSideEnricher(q record.Queue, compactor, extractor record.Hook, indexer *recall.Indexer, opts EnrichOptions) *Enricher {
	return NewEnricher(q, []record.Hook{compactor, extractor, indexer}, nil, opts)
}
