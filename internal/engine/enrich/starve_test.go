package enrich

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// invalidSummarizer is a side model whose every summary is unusable: it
// answers at once with an invalid reply, or (hung) only when its caller
// gives up.
type invalidSummarizer struct{ hung bool }

func (s invalidSummarizer) Summarize(ctx context.Context, _ Input) (Output, error) {
	if s.hung {
		<-ctx.Done()
		return Output{}, fmt.Errorf("summarise: %w", ctx.Err())
	}
	return Output{}, fmt.Errorf("summarise: %w", ErrBadReply)
}

// handedHook counts the exchanges each id was handed to its hook in.
type handedHook struct {
	h      record.Hook
	mu     sync.Mutex
	handed map[string]int
}

func (c *handedHook) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	c.mu.Lock()
	for _, ex := range exs {
		c.handed[ex.ID]++
	}
	c.mu.Unlock()
	return c.h.AfterSaveBatch(ctx, exs, results)
}

func (c *handedHook) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.handed))
	for k, v := range c.handed {
		out[k] = v
	}
	return out
}

// TestFailingCompactorStarvesNoHook: the compactor's side model fails on
// every summary — answering with an invalid reply, or not answering until
// its deadline — while the indexer works. Every saved exchange still gets
// indexed (its messages searchable), each handed to the indexer once: a
// hook that failed is retried on its own, under its own deadline, and the
// hooks that succeeded are not run again.
func TestFailingCompactorStarvesNoHook(t *testing.T) {
	for _, tc := range []struct {
		name string
		hung bool
	}{{"invalid reply", false}, {"hung side model", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := mustSQLiteAt(t, filepath.Join(t.TempDir(), "memgate.db"))
			id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
			q := record.NewMemoryQueue(0)
			const n = 6
			at := time.Now().Add(-time.Hour).UTC()
			var ids []string
			for i := range n {
				ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: at.Add(time.Duration(i) * time.Minute),
					Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("Lantern number %d hangs by the door.", i)}},
					Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("Lantern %d noted.", i)}}
				ids = append(ids, ex.ID)
				saveForEnrichment(t, st, q, ex)
			}
			indexer := &handedHook{h: recall.NewIndexer(st, recall.NewLocal(16), nil), handed: map[string]int{}}
			// The hooks in the gateway's order: compaction first. Every
			// compaction of c calls the side model (MaxMessages 2), and no
			// fallback writes a summary instead.
			hooks := []record.Hook{
				New(st, st, invalidSummarizer{hung: tc.hung}, nil, wordCounter{}, Options{
					RecentTokens: 100000, HighWatermark: 0.9, LowWatermark: 0.4, MaxMessages: 2, KeepMessages: 1,
					MaxSummaryTokens: 50, MaxFacts: 100,
				}, nil),
				indexer,
			}
			// The hung side model holds each compaction for the whole
			// hook deadline: 2s, long enough for the indexer's work on a
			// busy machine.
			e := NewEnricher(q, hooks, nil, EnrichOptions{HookTimeout: 2 * time.Second, Block: 50 * time.Millisecond,
				BackoffBase: 10 * time.Millisecond, Interval: 10 * time.Millisecond})
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			waitFor(t, "every exchange enriched or given up", func() bool { return pending(t, q) == 0 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			handed := indexer.counts()
			for i, exID := range ids {
				if handed[exID] != 1 {
					t.Errorf("exchange %d was handed to the indexer %d times, want once", i, handed[exID])
				}
			}
			fp, err := st.Footprint(context.Background(), id.Tenant, id.User)
			if err != nil {
				t.Fatal(err)
			}
			if fp.Items != 2*n {
				t.Errorf("%d items indexed, want %d (each exchange's user message and reply)", fp.Items, 2*n)
			}
			if fp.Summaries != 0 {
				t.Errorf("%d summaries stored from a side model whose every summary is invalid", fp.Summaries)
			}
		})
	}
}

// scriptedHook fails its calls as fail says (by call number, from 1)
// and counts them; hang makes a failing call wait for its deadline.
type scriptedHook struct {
	calls atomic.Int64
	fail  func(call int64) bool
	hang  bool
}

func (h *scriptedHook) AfterSaveBatch(ctx context.Context, _ []memory.Exchange, _ []memory.SaveResult) error {
	if !h.fail(h.calls.Add(1)) {
		return nil
	}
	if h.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return errors.New("side model down")
}

// TestRoundRetriesOnlyFailedHooks: in a round, a hook that fails is run
// again (up to Attempts), the hooks that succeeded are not — unless a
// hook before them succeeds only on its retry, as the indexer then has its
// pins to index — and a hook that ran out its own deadline is not run
// again in the round. Each hook after the failing one runs in every case.
func TestRoundRetriesOnlyFailedHooks(t *testing.T) {
	always := func(int64) bool { return true }
	for _, tc := range []struct {
		name       string
		first      *scriptedHook
		firstCalls int64
		laterCalls int64
	}{
		{"fails throughout", &scriptedHook{fail: always}, 3, 1},
		{"fails once", &scriptedHook{fail: func(n int64) bool { return n == 1 }}, 2, 2},
		{"hangs", &scriptedHook{fail: always, hang: true}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := record.NewMemoryQueue(0)
			enqueueEnriched(t, q, "a", "a0")
			enqueueEnriched(t, q, "a", "a1")
			later := &scriptedHook{fail: func(int64) bool { return false }}
			e := NewEnricher(q, []record.Hook{tc.first, later}, nil, EnrichOptions{HookTimeout: time.Second, BackoffBase: time.Millisecond})
			ds, err := q.Claim(ctx, "a", 10, time.Hour, 0)
			if err != nil || len(ds) != 2 {
				t.Fatalf("claimed %d entries (%v), want 2", len(ds), err)
			}
			e.round(ctx, ds, nil)
			if got := tc.first.calls.Load(); got != tc.firstCalls {
				t.Errorf("the failing hook ran %d times, want %d", got, tc.firstCalls)
			}
			if got := later.calls.Load(); got != tc.laterCalls {
				t.Errorf("the hook after it ran %d times, want %d", got, tc.laterCalls)
			}
			if n := pending(t, q); n != 0 {
				t.Errorf("%d entries left unacknowledged after the round, want none (enriched or given up)", n)
			}
		})
	}
}
