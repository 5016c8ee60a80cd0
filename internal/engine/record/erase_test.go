package record_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/testenv"
)

// eraseStore is what the erasure race needs of a store: the worker saves
// through it, the hooks write to it, the operator erases through it, and the
// next prompt reads from it.
type eraseStore interface {
	record.Saver
	record.DeadLetterer
	record.Adopter
	recall.IndexStore
	recall.FactWriter
	enrich.Store
	DeleteUser(ctx context.Context, tenant, user string) error
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
	Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error)
	SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
}

// slowModel stands in for the extraction and summary models: each call
// waits for delay() before answering, so hooks run across the erasure.
type slowModel struct{ delay func() <-chan struct{} }

func (m slowModel) CreateChatCompletion(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	select {
	case <-m.delay():
	case <-ctx.Done():
		return openai.ChatCompletionResponse{}, ctx.Err()
	}
	var facts []string
	for _, msg := range req.Messages {
		if strings.Contains(msg.Content, "Porto") {
			facts = append(facts, `{"type":"profile","key":"city","value":"Porto","confidence":0.9}`,
				`{"type":"limit","key":"diet","value":"vegan","confidence":0.9}`)
		}
		if strings.Contains(msg.Content, "Braga") {
			facts = append(facts, `{"type":"profile","key":"city","value":"Braga","confidence":0.9}`)
		}
	}
	return openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{
		Message: openai.ChatCompletionMessage{Role: "assistant", Content: `{"facts":[` + strings.Join(facts, ",") + `]}`},
	}}}, nil
}

func (m slowModel) Summarize(ctx context.Context, in enrich.Input) (enrich.Output, error) {
	select {
	case <-m.delay():
	case <-ctx.Done():
		return enrich.Output{}, ctx.Err()
	}
	var parts []string
	for _, msg := range in.Messages {
		parts = append(parts, msg.Content)
	}
	return enrich.Output{Summary: "The user said: " + strings.Join(parts, " ")}, nil
}

// gate decides when the fake models answer: after a random 0-40 ms, or
// once the current erasure is done.
type gate struct {
	mu     sync.Mutex
	erased chan struct{} // nil: random delays
}

// set starts a new try and returns the channel to close once the user is
// erased; with afterErase the models wait for it.
func (g *gate) set(afterErase bool) chan struct{} {
	ch := make(chan struct{})
	g.mu.Lock()
	defer g.mu.Unlock()
	g.erased = nil
	if afterErase {
		g.erased = ch
	}
	return ch
}

func (g *gate) delay() <-chan struct{} {
	g.mu.Lock()
	ch := g.erased
	g.mu.Unlock()
	if ch != nil {
		return ch
	}
	done := make(chan struct{})
	time.AfterFunc(time.Duration(rand.IntN(40))*time.Millisecond, func() { close(done) })
	return done
}

// wordCounter counts a token per four bytes.
type wordCounter struct{}

func (wordCounter) Message(_ string, m memory.Message) int { return len(m.Content)/4 + 4 }
func (wordCounter) Text(_, s string) int                   { return len(s) / 4 }

// eraseHooks returns the production hooks — indexing, fact extraction,
// compaction with pins and summaries — on store, with models that answer
// after delay().
func eraseHooks(store eraseStore, delay func() <-chan struct{}) []record.Hook {
	model := slowModel{delay: delay}
	emb := recall.NewLocal(64)
	return []record.Hook{
		recall.NewExtractor(model, store, recall.ExtractorOptions{Model: "extract", MaxPerUser: 50}, nil),
		enrich.New(store, store, model, nil, wordCounter{}, enrich.Options{
			RecentTokens: 1000, HighWatermark: 0.8, LowWatermark: 0.4, MaxMessages: 1, KeepMessages: 0,
			MaxSummaryTokens: 200, MaxFacts: 50, FallbackAfter: 1,
		}, nil),
		recall.NewIndexer(store, emb, nil),
	}
}

// leftOf lists what the next prompt of id could still draw on: the recent
// window (the cache's, with Redis), conversations, facts (history
// included), recalled passages by text and by vector, and the summary.
func leftOf(t *testing.T, store eraseStore, id memory.Identity) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	if msgs, err := store.Recent(ctx, id, 50); err != nil {
		t.Fatalf("Recent: %v", err)
	} else if len(msgs) > 0 {
		left = append(left, fmt.Sprintf("%d recent messages", len(msgs)))
	}
	if convs, err := store.Conversations(ctx, id.Tenant, id.User); err != nil {
		t.Fatalf("Conversations: %v", err)
	} else if len(convs) > 0 {
		left = append(left, fmt.Sprintf("%d conversations", len(convs)))
	}
	if facts, err := store.Facts(ctx, id.Tenant, id.User, time.Now(), true); err != nil {
		t.Fatalf("Facts: %v", err)
	} else if len(facts) > 0 {
		left = append(left, fmt.Sprintf("%d facts", len(facts)))
	}
	for _, word := range []string{"Porto", "vegan"} {
		if items, err := store.SearchText(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: word, Limit: 10}); err != nil {
			t.Fatalf("SearchText: %v", err)
		} else if len(items) > 0 {
			left = append(left, fmt.Sprintf("%d passages matching %q", len(items), word))
		}
	}
	vecs, _ := recall.NewLocal(64).Embed(ctx, []string{"I live in Porto and I am vegan"}, time.Time{})
	if items, err := store.SearchVector(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User,
		Embedding: vecs[0], Model: recall.LocalModel, Dims: 64, Limit: 10}); err != nil {
		t.Fatalf("SearchVector: %v", err)
	} else if len(items) > 0 {
		left = append(left, fmt.Sprintf("%d passages by vector", len(items)))
	}
	if _, err := store.LatestSummary(ctx, id); err == nil {
		left = append(left, "a summary")
	} else if !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("LatestSummary: %v", err)
	}
	return left
}

// waitUntil polls cond every few milliseconds until it holds, failing the
// test at the deadline.
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runEraseRace reproduces issue 15's report on one store and queue: a user
// says "I live in Porto and I am vegan", the operator erases the user about
// 20 ms later while the exchange is being stored and enriched (the models
// answer after 0-40 ms, or only once the erasure is done), and then nothing
// of the user may come back — not right after the pipeline settled, and not
// on any of the checks repeated after it. A fresh chat after the erasure is
// stored and enriched normally.
func runEraseRace(t *testing.T, store eraseStore, queue record.Queue, pending func() int64) {
	g := &gate{}
	opts := record.FastWorker()
	opts.Hooks = eraseHooks(store, g.delay)
	opts.StaleAfter = time.Second
	opts.DeadLetters, opts.Adopter = store, store
	w := record.NewWorker(queue, store, nil, opts)
	record.MustRunWorker(t, w)

	const tries = 10
	for i := range tries + 1 {
		id := memory.Identity{Tenant: "acme", User: fmt.Sprintf("user-%d", i), Conversation: "c1"}
		mode := "random"
		if i == tries {
			mode = "after-erase" // the worst order: every model answer lands after the erasure
		}
		erased := g.set(mode == "after-erase")
		ex := record.TestExchange(t, fmt.Sprintf("chat-%d", i), "I live in Porto and I am vegan", "Noted: Porto, and vegan.")
		ex.Identity = id
		ex.At = time.Now()
		record.Enqueue(t, queue, ex)
		time.Sleep(20 * time.Millisecond) // the operator erases 20 ms later
		if err := store.DeleteUser(context.Background(), id.Tenant, id.User); err != nil {
			t.Fatalf("try %d: DeleteUser: %v", i, err)
		}
		close(erased)
		waitUntil(t, "the pipeline to settle", 20*time.Second, func() bool { return pending() == 0 })
		// Check repeatedly: a late hook or cache fill must not bring anything back.
		for check := 0; check < 20; check++ {
			if left := leftOf(t, store, id); len(left) > 0 {
				t.Fatalf("try %d (%s), check %d: erased user came back: %s", i, mode, check, strings.Join(left, ", "))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A fresh start after the erasure is remembered as usual.
	g.set(false)
	id := memory.Identity{Tenant: "acme", User: "user-0", Conversation: "c1"}
	ex := record.TestExchange(t, "fresh", "I moved to Braga", "Noted: Braga.")
	ex.Identity = id
	ex.At = time.Now()
	record.Enqueue(t, queue, ex)
	waitUntil(t, "the fresh chat and its fact", 20*time.Second, func() bool {
		msgs, err := store.Recent(context.Background(), id, 50)
		if err != nil || len(msgs) != 2 {
			return false
		}
		facts, err := store.Facts(context.Background(), id.Tenant, id.User, time.Now(), false)
		if err != nil || len(facts) != 1 || !strings.Contains(facts[0].Value, "Braga") {
			hist, _ := store.Facts(context.Background(), id.Tenant, id.User, time.Now(), true)
			t.Logf("facts %+v err %v history %+v", facts, err, hist)
			return false
		}
		return true
	})
}

func TestEraseRaceSQLite(t *testing.T) {
	store := record.MustSQLite(t)
	runEraseRace(t, store, store.Outbox(), func() int64 { return record.OutboxPending(t, store) })
}

func TestEraseRacePostgresRedis(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := postgres.Open(ctx, testenv.PostgresURL(t), nil)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	queue, _ := record.MustRedisQueue(t, prefix)
	runEraseRace(t, pg, queue, func() int64 {
		n, err := queue.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
}
