package enrich

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/testenv"
)

// Enrichment over a queue is at-least-once: a round that cannot
// acknowledge (it lost Redis, its process paused past StaleAfter) is
// redelivered, whole or in part, and its exchanges enriched again. What the
// hooks write must then stay as the first round left it.

// enrichedStore is a store the hooks write to, with what a test reads of
// what they wrote.
type enrichedStore interface {
	Store
	FactWriter
	recall.IndexStore
	exchangeSaver
	Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
	Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error)
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
}

// enrichedStores opens a fresh store of each kind.
func enrichedStores(tb testing.TB) map[string]enrichedStore {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := postgres.Open(ctx, testenv.PostgresURL(tb), nil)
	if err != nil {
		tb.Fatalf("open postgres: %v", err)
	}
	tb.Cleanup(func() { _ = pg.Close() })
	return map[string]enrichedStore{
		"sqlite":   mustSQLiteAt(tb, filepath.Join(tb.TempDir(), "memgate.db")),
		"postgres": pg,
	}
}

// statedChat is a fact extraction model that finds, in whatever it is
// asked, that the user drinks tea; it counts its calls.
type statedChat struct{ calls atomic.Int64 }

func (c *statedChat) CreateChatCompletion(context.Context, openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	c.calls.Add(1)
	return openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{
		Content: `{"facts": [{"type": "preference", "key": "drink", "value": "tea", "confidence": 0.6}]}`,
	}}}}, nil
}

// enrichedState is what enrichment left of a conversation: the user's
// facts (superseded ones too), the conversation's summary versions and
// the rows stored about the user.
type enrichedState struct {
	Facts     []memory.Fact
	Summaries []memory.Summary
	Footprint memory.Footprint
}

func readEnriched(tb testing.TB, st enrichedStore, id memory.Identity) enrichedState {
	tb.Helper()
	ctx := context.Background()
	facts, err := st.Facts(ctx, id.Tenant, id.User, time.Now().Add(time.Hour), true)
	if err != nil {
		tb.Fatal(err)
	}
	sums, err := st.Summaries(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	fp, err := st.Footprint(ctx, id.Tenant, id.User)
	if err != nil {
		tb.Fatal(err)
	}
	return enrichedState{Facts: facts, Summaries: sums, Footprint: fp}
}

// TestRedeliveredRoundChangesNothing: a round enriches a conversation's
// turns (pins, extracted facts, a summary version, index items) and
// cannot acknowledge them; they are delivered again, as a stale reclaim
// does, whole or only the later turns. The facts keep their mention
// counts and confidence, no summary version is asked of the model or
// stored again, and no row is added: nothing observable changes. The
// SQLite and PostgreSQL stores behave alike.
func TestRedeliveredRoundChangesNothing(t *testing.T) {
	for kind, st := range enrichedStores(t) {
		for _, redo := range []struct {
			name string
			from int // the first delivery of the round delivered again
		}{{"whole round", 0}, {"later turns", 3}} {
			t.Run(kind+"/"+redo.name, func(t *testing.T) {
				ctx := context.Background()
				id := memory.Identity{Tenant: "t", User: fmt.Sprintf("u-%s-%d", kind, redo.from), Conversation: "c"}
				q := record.NewMemoryQueue(0)
				at := time.Now().Add(-time.Hour).UTC()
				says := []string{"I live in Lisbon.", "We hang lantern number 1.", "I live in Lisbon.", "We hang lantern number 2.", "I live in Lisbon."}
				for i, text := range says {
					saveForEnrichment(t, st, q, memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: at.Add(time.Duration(i) * time.Minute),
						Turn: []memory.Message{{Role: "user", Content: text}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}})
				}
				model := &billedSummarizer{gate: newGate(), calls: map[int]int{}}
				close(model.release)
				chat := &statedChat{}
				// The hooks as the gateway wires them.
				hooks := []record.Hook{
					New(st, st, nil, model, wordCounter{}, Options{
						RecentTokens: 100000, HighWatermark: 0.9, LowWatermark: 0.4, MaxMessages: 6, KeepMessages: 2,
						MaxSummaryTokens: 50, MaxFacts: 100,
					}, nil),
					CoalesceTurns(recall.NewExtractor(chat, st, recall.ExtractorOptions{Model: "m"}, nil)),
					recall.NewIndexer(st, recall.NewLocal(16), nil),
				}
				e := NewEnricher(q, hooks, nil, EnrichOptions{})
				ds, err := q.Claim(ctx, "a", 100, time.Hour, 0)
				if err != nil || len(ds) != len(says) {
					t.Fatalf("claimed %d entries (%v), want %d", len(ds), err, len(says))
				}
				e.round(ctx, ds, nil)
				first := readEnriched(t, st, id)
				if len(first.Summaries) != 1 || len(first.Facts) != 2 {
					t.Fatalf("first round left %+v; want a summary version and two facts", first)
				}
				again := ds[redo.from:]
				for i := range again {
					again[i].Attempts++
				}
				e.round(ctx, again, nil)
				got := readEnriched(t, st, id)
				if !reflect.DeepEqual(got.Facts, first.Facts) {
					t.Errorf("facts after the redelivery:\n%+v\nwant as the first round left them:\n%+v", got.Facts, first.Facts)
				}
				if !reflect.DeepEqual(got.Summaries, first.Summaries) {
					t.Errorf("summaries after the redelivery:\n%+v\nwant as the first round left them:\n%+v", got.Summaries, first.Summaries)
				}
				if got.Footprint != first.Footprint {
					t.Errorf("rows after the redelivery: %+v, want as the first round left them: %+v", got.Footprint, first.Footprint)
				}
				for version, n := range model.billed() {
					if n != 1 {
						t.Errorf("summary version %d was asked of the model %d times, want once", version, n)
					}
				}
			})
		}
	}
}
