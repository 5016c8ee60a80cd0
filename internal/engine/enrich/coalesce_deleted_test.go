package enrich

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// echoingChat is a fact extraction model that finds one fact in each line
// of the user messages it is asked about: the line itself.
type echoingChat struct{}

func (echoingChat) CreateChatCompletion(_ context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	_, said, _ := strings.Cut(req.Messages[len(req.Messages)-1].Content, "\n")
	var facts []map[string]any
	for i, line := range strings.Split(said, "\n") {
		facts = append(facts, map[string]any{"type": "profile", "key": fmt.Sprintf("said_%d_%d", len(line), i), "value": line, "confidence": 0.9})
	}
	b, _ := json.Marshal(map[string]any{"facts": facts})
	return openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Content: string(b)}}}}, nil
}

// said is an exchange of id at at: the user says text, the reply notes it.
func said(id memory.Identity, at time.Time, text string) memory.Exchange {
	return memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: at,
		Turn: []memory.Message{{Role: "user", Content: text}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}}
}

// TestCoalescedTurnsOfADeletedConversation: a conversation is deleted
// while one of its turns still waits for enrichment (a round claimed it
// before the delete purged the queue, or another gateway's in-memory
// queue holds it), and the user goes on in a conversation of the same
// name. One round takes both turns, which fact extraction asks about
// together (CoalesceTurns). The deleted turn's words never come back as
// a fact — stated in the new conversation's message, they would outlive
// the delete in every prompt of the user — and the new turn's facts are
// kept, whichever turn the queue gives first (two gateways enqueue in the
// order their saves end).
func TestCoalescedTurnsOfADeletedConversation(t *testing.T) {
	for kind, st := range enrichedStores(t) {
		for _, deletedFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/deleted turn queued first=%v", kind, deletedFirst), func(t *testing.T) {
				ctx := context.Background()
				id := memory.Identity{Tenant: "t", User: fmt.Sprintf("u-%s-%v", kind, deletedFirst), Conversation: "c"}
				at := time.Now().Add(-time.Minute).UTC()
				save := func(i int, text string) []byte {
					return savedEnrichment(t, st, said(id, at.Add(time.Duration(i)*time.Second), text))
				}
				deleted := save(0, "I keep bees named Ptolemy.")
				if err := st.(interface {
					DeleteConversation(context.Context, memory.Identity) error
				}).DeleteConversation(ctx, id); err != nil {
					t.Fatal(err)
				}
				kept := save(2, "I drink rooibos.")
				q := record.NewMemoryQueue(0)
				order := [][]byte{deleted, kept}
				if !deletedFirst {
					order = [][]byte{kept, deleted}
				}
				for _, p := range order {
					if err := q.Enqueue(ctx, p); err != nil {
						t.Fatal(err)
					}
				}
				hooks := []record.Hook{CoalesceTurns(recall.NewExtractor(echoingChat{}, st, recall.ExtractorOptions{Model: "m"}, nil))}
				ds, err := q.Claim(ctx, "a", 10, time.Hour, 0)
				if err != nil || len(ds) != 2 {
					t.Fatalf("claimed %d entries (%v), want 2", len(ds), err)
				}
				NewEnricher(q, hooks, nil, EnrichOptions{}).round(ctx, ds, nil)
				var values []string
				for _, f := range readEnriched(t, st, id).Facts {
					values = append(values, f.Value)
				}
				if len(values) != 1 || values[0] != "I drink rooibos." {
					t.Fatalf("facts = %q, want only the new conversation's %q", values, "I drink rooibos.")
				}
			})
		}
	}
}

// TestRoundOfAnErasedAndRecreatedUser: a user is erased while one of
// their turns still waits for enrichment (another gateway's in-memory
// queue, a round's deferred turns: what the erasure's purge does not
// reach), and they chat again. One round takes both turns. The new turn
// is indexed (and its facts extracted) as any turn of a new user; the old
// one is not: every write of a round is guarded from its user's earliest
// exchange in it, so the old turn, left in, made the store refuse the new
// one's too.
func TestRoundOfAnErasedAndRecreatedUser(t *testing.T) {
	for kind, st := range enrichedStores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			id := memory.Identity{Tenant: "t", User: "recreated-" + kind, Conversation: "c"}
			save := func(at time.Time, text string) []byte { return savedEnrichment(t, st, said(id, at, text)) }
			erasing := st.(interface {
				DeleteUser(context.Context, string, string) error
				ErasedAt(context.Context, string, string) (time.Time, error)
			})
			erased := save(time.Now().Add(-time.Minute), "I keep bees named Ptolemy.")
			if err := erasing.DeleteUser(ctx, id.Tenant, id.User); err != nil {
				t.Fatal(err)
			}
			at, err := erasing.ErasedAt(ctx, id.Tenant, id.User)
			if err != nil {
				t.Fatal(err)
			}
			again := save(at.Add(time.Second), "I drink rooibos.")
			q := record.NewMemoryQueue(0)
			for _, p := range [][]byte{erased, again} {
				if err := q.Enqueue(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			hooks := []record.Hook{recall.NewIndexer(st, recall.NewLocal(16), nil),
				CoalesceTurns(recall.NewExtractor(echoingChat{}, st, recall.ExtractorOptions{Model: "m"}, nil))}
			ds, err := q.Claim(ctx, "a", 10, time.Hour, 0)
			if err != nil || len(ds) != 2 {
				t.Fatalf("claimed %d entries (%v), want 2", len(ds), err)
			}
			NewEnricher(q, hooks, nil, EnrichOptions{Erased: erasing.ErasedAt}).round(ctx, ds, nil)
			got := readEnriched(t, st, id)
			var values []string
			for _, f := range got.Facts {
				values = append(values, f.Value)
			}
			// The new turn's two messages indexed.
			if got.Footprint.Items != 2 || len(values) != 1 || values[0] != "I drink rooibos." {
				t.Fatalf("after the round: %d items, facts %q; want the new turn's messages and its fact indexed, %q",
					got.Footprint.Items, values, "I drink rooibos.")
			}
		})
	}
}
