package recall

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// embeddedCost is what the texts cost against exchangeEmbedBytes.
func embeddedCost(texts []string) int {
	n := 0
	for _, t := range texts {
		n += len(t) + itemEmbedBytes
	}
	return n
}

// indexerWindows are the indexer's two ways of cutting messages: as Chunk
// does (the local and openai embedders), and in runs of a window (the
// built-in encoder's, here a piece a word and 128 pieces).
var indexerWindows = []struct {
	name string
	w    *Window
}{
	{"chunks", nil},
	{"window", &Window{Pieces: wordPieces(1), Max: 128}},
}

// A first request that resends a long history makes one exchange of
// thousands of messages: its indexing embeds at most exchangeEmbedBytes
// of them, the newest messages first, and stores the older ones without a
// vector, where full text finds them and a reindex embeds them.
func TestIndexerEmbedsAnExchangeWithinItsBudget(t *testing.T) {
	for _, tt := range indexerWindows {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			const n = 3000 // about 200 KB, six times the budget
			st, emb, _ := indexLongHistory(t, tt.w, n)

			if cost := embeddedCost(emb.texts); cost > exchangeEmbedBytes || cost < exchangeEmbedBytes-200 {
				t.Fatalf("embedded %d texts costing %d bytes, want the budget of %d spent (within a message of it)", len(emb.texts), cost, exchangeEmbedBytes)
			}
			// Every message is stored, the newest with vectors: no
			// message with a vector is older than one without.
			oldestEmbedded, newestTextOnly, stored, withVec := n, -1, 0, 0
			for _, it := range st.items {
				if it.Kind != KindMessage {
					continue
				}
				stored++
				i, err := strconv.Atoi(strings.TrimPrefix(it.Ref, "e1:"))
				if err != nil {
					t.Fatalf("item ref %q", it.Ref)
				}
				if len(it.Embedding) > 0 {
					withVec++
					oldestEmbedded = min(oldestEmbedded, i)
				} else {
					newestTextOnly = max(newestTextOnly, i)
					if it.Model != "" || it.Dims != 0 {
						t.Fatalf("message %d stored without a vector names model %q dims %d", i, it.Model, it.Dims)
					}
				}
			}
			if stored != n || withVec != len(emb.texts) {
				t.Fatalf("stored %d messages, %d with vectors, embedded %d texts; want %d stored", stored, withVec, len(emb.texts), n)
			}
			if newestTextOnly < 0 || newestTextOnly >= oldestEmbedded || oldestEmbedded >= n-2 {
				t.Fatalf("newest message without a vector %d, oldest with one %d: want the newest messages (the turn and reply among them) embedded, the older ones not", newestTextOnly, oldestEmbedded)
			}
			hits, err := st.SearchText(ctx, memory.ItemQuery{Tenant: "t", User: "u", Text: "lantern0", Limit: 5})
			if err != nil || len(hits) == 0 || hits[0].Ref != "e1:0" {
				t.Fatalf("full text does not find the oldest message: %v, %v", hits, err)
			}
			done, err := Reindex(ctx, st, NewLocal(16), 256, nil)
			if err != nil || done != n-withVec {
				t.Fatalf("reindex embedded %d items (%v), want the %d stored without a vector", done, err, n-withVec)
			}
		})
	}
}

// An ordinary exchange, a question and a reply of a few KB, is embedded
// whole: the budget only bites on histories.
func TestIndexerEmbedsAnOrdinaryExchangeWhole(t *testing.T) {
	question := strings.Repeat("We are moving to Porto in March and the boxes are still in the hallway. ", 20)
	reply := strings.Repeat("Book the movers early, label every box by room, and keep the documents with you. ", 60)
	for _, tt := range indexerWindows {
		t.Run(tt.name, func(t *testing.T) {
			st, emb := newFakeStore(), &recordingEmbedder{Embedder: NewLocal(16)}
			ix := NewIndexer(st, emb, nil)
			ix.Window = tt.w
			ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: question}},
				Reply: memory.Message{Role: "assistant", Content: reply}}
			if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
				t.Fatal(err)
			}
			if len(st.items) < 3 {
				t.Fatalf("stored %d items, want the long messages cut", len(st.items))
			}
			for _, it := range st.items {
				if len(it.Embedding) == 0 {
					t.Fatalf("%s#%d (%d bytes of %d) stored without a vector", it.Ref, it.Chunk, len(it.Text), len(question)+len(reply))
				}
			}
			if len(emb.texts) != len(st.items) {
				t.Fatalf("embedded %d texts for %d items", len(emb.texts), len(st.items))
			}
		})
	}
}
