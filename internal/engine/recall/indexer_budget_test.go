package recall

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// embeddedCost is what the texts cost against userEmbedBytes.
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
// thousands of messages: its indexing embeds at most userEmbedBytes
// of them, the newest messages first, and stores the older ones without a
// vector, where full text finds them and a reindex embeds them.
func TestIndexerEmbedsAnExchangeWithinItsBudget(t *testing.T) {
	for _, tt := range indexerWindows {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			const n = 3000 // about 200 KB, six times the budget
			st, emb, _ := indexLongHistory(t, tt.w, n)

			if cost := embeddedCost(emb.texts); cost > userEmbedBytes || cost < userEmbedBytes-200 {
				t.Fatalf("embedded %d texts costing %d bytes, want the budget of %d spent (within a message of it)", len(emb.texts), cost, userEmbedBytes)
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

// importedHistory is what an import of n exchanges of id stores and the
// enricher hands the indexer in one round: exchanges a minute apart,
// oldest first, each a question and a reply of about size bytes, every
// message with the time it was said.
func importedHistory(id memory.Identity, n, size int) ([]memory.Exchange, []memory.SaveResult) {
	said := time.Date(2023, 5, 7, 18, 30, 0, 0, time.UTC)
	pad := func(s string) string {
		return s + strings.Repeat(" We walked along the harbour and talked about the garden.", max(0, size-len(s))/57)
	}
	exs := make([]memory.Exchange, n)
	results := make([]memory.SaveResult, n)
	for i := range exs {
		at := said.Add(time.Duration(i) * time.Minute)
		exs[i] = memory.Exchange{ID: fmt.Sprintf("im%d", i), Identity: id, At: at,
			Turn:  []memory.Message{{Role: "user", Content: pad(fmt.Sprintf("Question %d about lantern%d.", i, i)), CreatedAt: at}},
			Reply: memory.Message{Role: "assistant", Content: pad(fmt.Sprintf("Answer %d about lantern%d.", i, i)), CreatedAt: at.Add(time.Second)}}
		results[i] = memory.SaveResult{Inserted: 2, GuardSince: said}
	}
	return exs, results
}

// An import stores a user's history as many exchanges, which the enricher
// hands the indexer together: they share one budget, spent on the newest
// messages, so one import costs the encoder what one long resent history
// does, not userEmbedBytes an exchange. The rest is deferred, and
// Backfill embeds it, newest first. Another user's exchange in the same
// batch has its own budget: embedded whole.
func TestIndexerBoundsAUsersExchangesInOneBatch(t *testing.T) {
	for _, tt := range indexerWindows {
		t.Run(tt.name, func(t *testing.T) {
			const n = 150 // 300 messages of about 1 KB: nine times the budget
			st, emb := newFakeStore(), &recordingEmbedder{Embedder: NewLocal(16)}
			ix := NewIndexer(st, emb, nil)
			ix.Window = tt.w
			exs, results := importedHistory(memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, n, 1000)
			other := memory.Exchange{ID: "live", Identity: memory.Identity{Tenant: "t", User: "v", Conversation: "c"}, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: "Where did we leave the bicycle?"}},
				Reply: memory.Message{Role: "assistant", Content: "By the bakery on Rua Augusta."}}
			exs, results = append(exs, other), append(results, memory.SaveResult{Inserted: 2})
			if err := ix.AfterSaveBatch(context.Background(), exs, results); err != nil {
				t.Fatal(err)
			}

			var imported []string // the texts of u's items embedded
			oldestEmbedded, newestTextOnly, textOnly := 2*n, -1, 0
			for _, it := range st.items {
				if it.User == "v" {
					if len(it.Embedding) == 0 {
						t.Fatalf("the other user's %s#%d was left without a vector", it.Ref, it.Chunk)
					}
					continue
				}
				ex, msg, _ := strings.Cut(strings.TrimPrefix(it.Ref, "im"), ":")
				e, _ := strconv.Atoi(ex)
				m, _ := strconv.Atoi(msg)
				pos := 2*e + m // the message's place in the history
				if len(it.Embedding) > 0 {
					imported = append(imported, it.Text)
					oldestEmbedded = min(oldestEmbedded, pos)
				} else {
					textOnly++
					newestTextOnly = max(newestTextOnly, pos)
				}
			}
			cost := embeddedCost(imported)
			t.Logf("embedded %d texts of the import, %d bytes counted; %d left without a vector", len(imported), cost, textOnly)
			if cost > userEmbedBytes || cost < userEmbedBytes-1200 {
				t.Fatalf("the import's %d exchanges had %d texts embedded costing %d bytes, want the user's budget of %d spent once (within a message of it)",
					n, len(imported), cost, userEmbedBytes)
			}
			if newestTextOnly < 0 || newestTextOnly >= oldestEmbedded || oldestEmbedded >= 2*n-2 {
				t.Fatalf("newest message without a vector %d, oldest with one %d: want the newest embedded, the older ones not", newestTextOnly, oldestEmbedded)
			}
			if ix.Deferred() != textOnly {
				t.Fatalf("%d items deferred, want the %d the budget left without a vector", ix.Deferred(), textOnly)
			}
			if want := fmt.Sprintf("im%d:%d", newestTextOnly/2, newestTextOnly%2); ix.deferred.items[0].Ref != want {
				t.Fatalf("first item to backfill %s, want the newest left without a vector (%s)", ix.deferred.items[0].Ref, want)
			}
			if done := backfillAll(t, ix); done != textOnly {
				t.Fatalf("backfilled %d items, want %d", done, textOnly)
			}
			for _, it := range st.items {
				if len(it.Embedding) == 0 {
					t.Fatalf("%s#%d has no vector after the backfill", it.Ref, it.Chunk)
				}
			}
		})
	}
}

// A history of texts the embedder reads as many pieces a byte (random
// letters, digits, punctuation: about one piece a byte of the built-in
// encoder, four times English) costs the encoder by its pieces, not its
// bytes: the pieces one user's batch has embedded are bounded as those of
// userEmbedBytes of English are, however few bytes carry them.
func TestIndexerBoundsThePiecesItEmbeds(t *testing.T) {
	const n = 2000
	w := &Window{Pieces: func(s string) int { return len(s) }, Max: 128} // a piece a byte
	st, emb := newFakeStore(), &recordingEmbedder{Embedder: NewLocal(16)}
	ix := NewIndexer(st, emb, nil)
	ix.Window = w
	prior := make([]memory.Message, n)
	for i := range prior {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		prior[i] = memory.Message{Role: role, Content: fmt.Sprintf("%04d qzx fkw jvb pmt rgy hcd wnl sxo tuk zqe bvf mjr gkp yxw dht lcn vzs qjf kbw xmr pgt", i)}
	}
	ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(), Prior: prior,
		Turn: []memory.Message{{Role: "user", Content: "And then?"}}, Reply: memory.Message{Role: "assistant", Content: "Nothing."}}
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: n + 2}); err != nil {
		t.Fatal(err)
	}
	pieces := 0
	for _, s := range emb.texts {
		pieces += min(w.Pieces(s), w.Max)
	}
	if limit := userEmbedBytes / embedPieceBytes; pieces > limit {
		t.Fatalf("embedded %d texts of %d pieces in all, over the %d of %d bytes of English", len(emb.texts), pieces, limit, userEmbedBytes)
	}
	if len(emb.texts) < 2 {
		t.Fatalf("embedded %d texts, want the turn and reply at least", len(emb.texts))
	}
}
