package enrich

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// TestRedisRoundThatLosesRedisKeepsItsModelCalls: a process's round
// extracts facts from two conversations (one side-model call each, over
// their coalesced turns) and writes them to PostgreSQL, then loses Redis
// before it acknowledges. Once Redis is back the process reclaims the
// entries and enriches them again: the model's answers it already paid
// for are kept, so the side model is called no more than the two times
// the exchanges need, and the facts stay as the first round left them.
func TestRedisRoundThatLosesRedisKeepsItsModelCalls(t *testing.T) {
	pa, _ := twoRedisProcs(t)
	at := time.Now().Add(-time.Hour).UTC()
	ids := []memory.Identity{{Tenant: "t", User: "u", Conversation: "c1"}, {Tenant: "t", User: "u", Conversation: "c2"}}
	for _, id := range ids {
		for i, text := range []string{"I drink tea.", "Tea, every morning."} {
			saveForEnrichment(t, pa.pg, pa.enrich, memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: at.Add(time.Duration(i) * time.Minute),
				Turn: []memory.Message{{Role: "user", Content: text}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}})
		}
	}
	chat := &statedChat{}
	opts := EnrichOptions{StaleAfter: 50 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	qa := &cutAcks{watchedQueue: pa.enrich}
	qa.cut.Store(true)
	hooks := []record.Hook{CoalesceTurns(recall.NewExtractor(chat, pa.pg, recall.ExtractorOptions{Model: "m"}, nil))}
	ea := NewEnricher(qa, hooks, nil, redisEnrichOptions(opts, pa, "a"))
	runEnricher(t, ea)
	waitFor(t, "the round to fail to acknowledge", func() bool { return value(t, ea.failures.WithLabelValues("ack")) >= 1 })
	first := stated(t, pa, ids[0])
	qa.cut.Store(false) // Redis is back
	drained(t, pa)
	if n := value(t, ea.enriched); n < 8 {
		t.Fatalf("enriched %v exchanges, want the four enriched again after Redis came back", n)
	}
	if n := chat.calls.Load(); n != int64(len(ids)) {
		t.Errorf("the side model was called %d times, want %d: one per conversation", n, len(ids))
	}
	if got := stated(t, pa, ids[0]); len(got) != 1 || len(first) != 1 || got[0].Mentions != first[0].Mentions || got[0].Value != "tea" {
		t.Errorf("facts %+v after the redo, want as the first round left them: %+v", got, first)
	}
}

// failingFacts is a fact store whose writes fail while fail is set.
type failingFacts struct {
	recall.FactWriter
	fail atomic.Bool
}

func (f *failingFacts) UpsertFact(ctx context.Context, fact memory.Fact, maxPerUser int) (memory.Fact, error) {
	if f.fail.Load() {
		return memory.Fact{}, fmt.Errorf("postgres: upsert fact: %w", memory.ErrUnavailable)
	}
	return f.FactWriter.UpsertFact(ctx, fact, maxPerUser)
}

// TestRedoneExtractionKeepsTheModelsAnswer: a round's extraction asks the
// side model, then cannot write the facts (the store failed); the round's
// hooks run again and write them, without asking the model again.
func TestRedoneExtractionKeepsTheModelsAnswer(t *testing.T) {
	for kind, st := range enrichedStores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			id := memory.Identity{Tenant: "t", User: "u-redo-" + kind, Conversation: "c"}
			q := record.NewMemoryQueue(0)
			saveForEnrichment(t, st, q, memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: time.Now().Add(-time.Minute).UTC(),
				Turn: []memory.Message{{Role: "user", Content: "I drink tea."}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}})
			chat := &statedChat{}
			facts := &failingFacts{FactWriter: st}
			facts.fail.Store(true)
			x := recall.NewExtractor(chat, facts, recall.ExtractorOptions{Model: "m"}, nil)
			ds, err := q.Claim(ctx, "a", 10, time.Hour, 0)
			if err != nil || len(ds) != 1 {
				t.Fatalf("claimed %d entries (%v)", len(ds), err)
			}
			en, err := record.DecodeEnrichment(ds[0].Payload)
			if err != nil {
				t.Fatal(err)
			}
			exs, res := []memory.Exchange{en.Exchange}, []memory.SaveResult{en.Result}
			if err := x.AfterSaveBatch(ctx, exs, res); !errors.Is(err, memory.ErrUnavailable) {
				t.Fatalf("first attempt: %v, want the store's failure", err)
			}
			facts.fail.Store(false)
			if err := x.AfterSaveBatch(ctx, exs, res); err != nil {
				t.Fatal(err)
			}
			if n := chat.calls.Load(); n != 1 {
				t.Errorf("the side model was called %d times, want once", n)
			}
			got, err := st.Facts(ctx, id.Tenant, id.User, time.Now(), false)
			if err != nil || len(got) != 1 || got[0].Value != "tea" {
				t.Errorf("facts %+v (%v), want the user's tea", got, err)
			}
		})
	}
}
