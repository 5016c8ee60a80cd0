package admin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// userRoundEmbedBytes is what the indexer embeds of one user's exchanges
// in one enrichment round at most (recall's userEmbedBytes: texts
// counted with 16 bytes more each).
const userRoundEmbedBytes = 32 << 10

// countingEmbedder embeds with the local embedder and counts what it is
// asked to embed: texts and their bytes, each counted 16 bytes more as the
// indexer's budget counts them.
type countingEmbedder struct {
	recall.Embedder
	mu           sync.Mutex
	texts, bytes int
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	c.mu.Lock()
	c.texts += len(texts)
	for _, t := range texts {
		c.bytes += len(t) + 16
	}
	c.mu.Unlock()
	return c.Embedder.Embed(ctx, texts, by)
}

// counted returns the texts and bytes embedded since the last call.
func (c *countingEmbedder) counted() (texts, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	texts, bytes = c.texts, c.bytes
	c.texts, c.bytes = 0, 0
	return texts, bytes
}

// indexedImportStore is what an import indexed for recall needs of a store.
type indexedImportStore interface {
	importStore
	recall.IndexStore
	ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error)
	SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
}

// TestImportIsIndexedWithinAUsersBudget imports 1,000 messages of about
// 1 KB (500 exchanges, one user) through the route, the capture pipeline
// and the enricher running the indexer, as the gateway wires them: the
// import's indexing embeds one user's budget a round (the enricher takes
// 256 exchanges a round), not every message, and the indexer's Backfill
// (the enricher's idle work) then gives every imported message its vector.
func TestImportIsIndexedWithinAUsersBudget(t *testing.T) {
	const exchanges, size, enrichBatch = 500, 1000, 256
	for name, open := range importStores {
		t.Run(name, func(t *testing.T) {
			st, ok := open(t).(indexedImportStore)
			if !ok {
				t.Fatalf("the %s store cannot be indexed", name)
			}
			q := record.NewMemoryQueue(0)
			url := serveImport(t, st, ImportOptions{}, q)

			pad := strings.Repeat(" We walked along the harbour and talked about the garden.", size/57)
			var msgs []string
			for i := range exchanges {
				at := said.Add(time.Duration(i) * time.Hour)
				msgs = append(msgs,
					fmt.Sprintf(`{"role":"user","content":"Question %d about lantern%d.%s","timestamp":%q}`, i, i, pad, at.Format(time.RFC3339)),
					fmt.Sprintf(`{"role":"assistant","content":"Answer %d about lantern%d.%s","timestamp":%q}`, i, i, pad, at.Add(time.Minute).Format(time.RFC3339)))
			}
			body := fmt.Sprintf(`{"user":"imp","conversation":"old","messages":[%s]}`, strings.Join(msgs, ","))
			start := time.Now()
			resp, b := post(t, url+"/v1/memory/import", body, nil)
			if r := decodeImport(t, b); resp.StatusCode != 200 || r.Stored != exchanges {
				t.Fatalf("import: %d %s", resp.StatusCode, b)
			}
			answered := time.Since(start)

			// The enricher starts once the import is queued for it whole
			// (the answer may come before the last group commit's
			// exchanges are queued), so its rounds are as full as they can
			// be: 256 exchanges.
			ctx, cancel := context.WithCancel(context.Background())
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				if n, _ := q.Pending(ctx); n == exchanges {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the import is not queued for enrichment after a minute")
				}
			}
			emb := &countingEmbedder{Embedder: recall.NewLocal(16)}
			ix := recall.NewIndexer(st, emb, nil)
			en := enrich.NewEnricher(q, []record.Hook{ix}, nil, enrich.EnrichOptions{Interval: time.Millisecond, Block: 50 * time.Millisecond})
			done := make(chan struct{})
			go func() { defer close(done); en.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				if n, _ := q.Pending(ctx); n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the import is not enriched after a minute")
				}
			}
			texts, bytes := emb.counted()
			rounds := (exchanges + enrichBatch - 1) / enrichBatch
			t.Logf("import of %d messages (%d KB) answered in %v; its indexing embedded %d texts, %d bytes counted, in %d rounds; %d items deferred",
				2*exchanges, len(body)>>10, answered.Round(time.Millisecond), texts, bytes, rounds, ix.Deferred())
			if bytes > rounds*userRoundEmbedBytes {
				t.Fatalf("the import's indexing embedded %d texts costing %d bytes, want at most the user's budget of %d a round (%d rounds)",
					texts, bytes, userRoundEmbedBytes, rounds)
			}

			// What the budget left, Backfill embeds.
			for {
				n, err := ix.Backfill(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			if left, err := st.ItemsToEmbed(ctx, emb.Model(), emb.Dims(), 0, 10); err != nil || len(left) > 0 {
				t.Fatalf("%d imported items without a vector after the backfill (%v)", len(left), err)
			}
			oldest := "Question 0 about lantern0." + pad
			vecs, err := emb.Embed(ctx, []string{oldest}, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			hits, err := st.SearchVector(ctx, memory.ItemQuery{Tenant: memory.DefaultTenant, User: "imp", Embedding: vecs[0], Model: emb.Model(), Dims: emb.Dims(), Limit: 1})
			if err != nil || len(hits) == 0 || hits[0].Text != oldest {
				t.Fatalf("the oldest imported message is not found by its vector: %v %v", hits, err)
			}
		})
	}
}
