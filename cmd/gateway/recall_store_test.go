package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// replyChatter answers every extraction with one fixed reply.
type replyChatter string

func (c replyChatter) CreateChatCompletion(context.Context, openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	return openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Role: "assistant", Content: string(c)}}}}, nil
}

// TestExtractionRepliesNeverPollute: malformed, oversized and unknown-type
// extraction replies store nothing (or only their valid items) in the real
// facts table, and never fail the capture.
func TestExtractionRepliesNeverPollute(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf(`{"type":"goal","key":"goal %d","value":"goal number %d","confidence":0.5}`, i, i)
	}
	tests := []struct {
		name   string
		reply  string
		stored int
	}{
		{"prose", "The user lives in Lisbon.", 0},
		{"truncated JSON", `{"facts":[{"type":"profile","key":"city","value":"Lis`, 0},
		{"wrong shape", `{"facts":{"city":"Lisbon"}}`, 0},
		{"oversized reply", `{"facts":[{"type":"profile","key":"bio","value":"` + strings.Repeat("x", 80<<10) + `","confidence":1}]}`, 0},
		{"unknown types only", `{"facts":[{"type":"password","key":"pw","value":"hunter2","confidence":1},{"type":"PROFILEX","key":"a","value":"b","confidence":1}]}`, 0},
		{"oversized value and bad confidence dropped", `{"facts":[{"type":"profile","key":"bio","value":"` + strings.Repeat("x", 301) + `","confidence":1},{"type":"profile","key":"age","value":"33","confidence":7},{"type":"profile","key":"city","value":"Lisbon","confidence":0.9}]}`, 1},
		{"wrong value types dropped", `{"facts":[{"type":"profile","key":"age","value":33,"confidence":1},null,{"type":"goal","key":"car","value":"buy a car","confidence":"high"}]}`, 0},
		{"too many items capped", `{"facts":[` + strings.Join(many, ",") + `]}`, recall.MaxExtracted},
	}
	up := upstreamtest.New(t, upstreamtest.Default())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
			bk, err := openStore(context.Background(), cfg, nil, logger)
			if err != nil {
				t.Fatal(err)
			}
			st := bk.store
			t.Cleanup(func() { bk.close() })
			rs := st
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					u := fmt.Sprintf("u%d", i)
					id := memory.Identity{Tenant: "t", User: u, Conversation: "c"}
					ex := memory.Exchange{ID: "ex-" + u, Identity: id, At: time.Now(),
						Turn:  []memory.Message{{Role: "user", Content: "I live in Lisbon and want to buy a car."}},
						Reply: memory.Message{Role: "assistant", Content: "Noted."}}
					res, err := st.SaveExchange(context.Background(), ex)
					if err != nil {
						t.Fatal(err)
					}
					x := recall.NewExtractor(replyChatter(tt.reply), rs, recall.ExtractorOptions{Model: "m", MaxPerUser: 200}, logger)
					if err := x.AfterSave(context.Background(), ex, res); err != nil {
						t.Fatalf("AfterSave = %v", err)
					}
					facts, err := rs.Facts(context.Background(), "t", u, time.Now(), true)
					if err != nil {
						t.Fatal(err)
					}
					if len(facts) != tt.stored {
						t.Fatalf("stored %d facts, want %d: %+v", len(facts), tt.stored, facts)
					}
					for _, f := range facts {
						if !f.Type.Valid() || f.Key == "" || f.Value == "" || len(f.Value) > recall.MaxFactValue || f.Confidence < 0 || f.Confidence > 1 {
							t.Fatalf("invalid fact stored: %+v", f)
						}
					}
				})
			}
		})
	}
}

// TestReindexCommand: after the embedding dimension changes, `gateway
// reindex` re-embeds every item once; a rerun finds nothing left.
func TestReindexCommand(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "memgate.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	writeCfg := func(dims int) {
		t.Helper()
		yaml := fmt.Sprintf("store:\n  driver: sqlite\n  sqlite_path: %s\nrecall:\n  embeddings:\n    provider: local\n    dimensions: %d\n", dbPath, dims)
		if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(k string) string {
		if k == "GATEWAY_CONFIG" {
			return cfgPath
		}
		return ""
	}
	reindexOut := func() string {
		t.Helper()
		var out, logs bytes.Buffer
		if err := run(context.Background(), []string{"gateway", "reindex"}, getenv, nil, &out, &logs); err != nil {
			t.Fatalf("reindex: %v\n%s", err, logs.String())
		}
		return out.String()
	}

	writeCfg(384)
	if got := reindexOut(); !strings.Contains(got, "reindexed 0 items") {
		t.Fatalf("empty store: %q", got)
	}
	// Index three passages with 384-dimensional vectors.
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	bk, err := openStore(context.Background(), mustLoad(t, getenv), nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	st := bk.store
	ix := recall.NewIndexer(st, recall.NewLocal(384), logger)
	ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
		Prior: []memory.Message{{Role: "user", Content: "I live in Lisbon."}, {Role: "assistant", Content: "Nice city."}},
		Turn:  []memory.Message{{Role: "user", Content: "I am vegetarian."}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	res, err := st.SaveExchange(context.Background(), ex)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.AfterSave(context.Background(), ex, res); err != nil {
		t.Fatal(err)
	}
	bk.close()

	writeCfg(64)
	if got := reindexOut(); !strings.Contains(got, "reindexed 4 items in") || !strings.Contains(got, "64 dimensions") {
		t.Fatalf("reindex after a dimension change: %q", got)
	}
	if got := reindexOut(); !strings.Contains(got, "reindexed 0 items") {
		t.Fatalf("rerun: %q", got)
	}
}

// TestReindexIndexesTheBacklog: what an exchange too long for one round of
// indexing left (a first request resending a long chat) and a gateway
// stopped before its idle rounds, `gateway reindex` indexes and embeds:
// the oldest message is found by full text and by its vector.
func TestReindexIndexesTheBacklog(t *testing.T) {
	dir := t.TempDir()
	dbPath, cfgPath := filepath.Join(dir, "memgate.db"), filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("store:\n  driver: sqlite\n  sqlite_path: %s\nrecall:\n  embeddings:\n    provider: local\n    dimensions: 64\n", dbPath)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "GATEWAY_CONFIG" {
			return cfgPath
		}
		return ""
	}
	ctx := context.Background()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	bk, err := openStore(ctx, mustLoad(t, getenv), nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	// 2,000 messages of about 450 bytes of distinct words: twice what one
	// round indexes.
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "team-chat"}
	msgs := make([]memory.Message, 2000)
	for i := range msgs {
		var b strings.Builder
		fmt.Fprintf(&b, "Message %d says zq%dzq.", i, i)
		for w := 0; b.Len() < 450; w++ {
			fmt.Fprintf(&b, " w%dx%d", i, w)
		}
		msgs[i] = memory.Message{Role: []string{"user", "assistant"}[i%2], Content: b.String()}
	}
	ex := memory.Exchange{ID: "e1", Identity: id, At: time.Now(), Prior: msgs[:1998], Turn: msgs[1998:1999], Reply: msgs[1999]}
	res, err := bk.store.SaveExchange(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	res.GuardSince = ex.At
	if err := recall.NewIndexer(bk.store, recall.NewLocal(64), logger).AfterSave(ctx, ex, res); err != nil {
		t.Fatal(err)
	}
	oldest := func(st store) (text, vector bool) {
		t.Helper()
		hits, err := st.SearchText(ctx, memory.ItemQuery{Tenant: "t", User: "u", Text: "zq0zq", Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		emb := recall.NewLocal(64)
		vecs, err := emb.Embed(ctx, []string{msgs[0].Content}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		near, err := st.SearchVector(ctx, memory.ItemQuery{Tenant: "t", User: "u", Embedding: vecs[0], Model: emb.Model(), Dims: emb.Dims(), Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return len(hits) > 0 && hits[0].Ref == "e1:0", len(near) == 1 && near[0].Ref == "e1:0"
	}
	if text, _ := oldest(bk.store); text {
		t.Fatal("the oldest message is indexed at once: the history fits one round and the test proves nothing")
	}
	bk.close()

	var out, logs bytes.Buffer
	if err := run(ctx, []string{"gateway", "reindex"}, getenv, nil, &out, &logs); err != nil {
		t.Fatalf("reindex: %v\n%s", err, logs.String())
	}
	bk, err = openStore(ctx, mustLoad(t, getenv), nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer bk.close()
	if text, vector := oldest(bk.store); !text || !vector {
		t.Fatalf("after gateway reindex, the oldest message is found by full text: %v, by its vector: %v\n%s", text, vector, out.String())
	}
}

// mustLoad loads the configuration getenv names.
func mustLoad(t *testing.T, getenv func(string) string) config.Config {
	t.Helper()
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// BenchmarkRecall measures one Recall (facts ranked against the query plus
// hybrid search) for a user with 2,000 indexed passages and 50 facts, on
// SQLite (PostgreSQL search at scale is `make bench`'s), with the local
// 384-dimensional embedder.
func BenchmarkRecall(b *testing.B) {
	cfg := config.Default()
	// The passages below carry the local embedder's vectors, so recall
	// must embed the query with it too (the encoder's cost is measured by
	// internal/encoder's benchmarks and bench's encoder cell).
	cfg.Recall.Embeddings.Provider = "local"
	cfg.Store.SQLitePath = filepath.Join(b.TempDir(), "memgate.db")
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()
	bk, err := openStore(ctx, cfg, nil, logger)
	if err != nil {
		b.Fatal(err)
	}
	st := bk.store
	defer func() {
		bk.close()
	}()
	rl, err := openRecall(cfg, st, bk.embeddings, kept{}, logger)
	if err != nil {
		b.Fatal(err)
	}
	rs := st
	words := strings.Fields("Lisbon Porto vegetarian dinner rent budget car tyres sister wedding Sintra trip Rome savings June jazz tennis garden cat doctor dentist train")
	var items []memory.Item
	for i := range 2000 {
		text := fmt.Sprintf("Passage %d: I talked about %s and %s with %s.", i, words[i%len(words)], words[(i*7)%len(words)], words[(i*13)%len(words)])
		items = append(items, memory.Item{Tenant: "t", User: "u", Conversation: fmt.Sprintf("c%d", i%20), Kind: recall.KindMessage, Ref: fmt.Sprintf("e%d:0", i), Text: text, CreatedAt: time.Now()})
	}
	local := recall.NewLocal(cfg.Recall.Embeddings.Dimensions)
	texts := make([]string, len(items))
	for i := range items {
		texts[i] = items[i].Text
	}
	vecs, _ := local.Embed(ctx, texts, time.Time{})
	for i := range items {
		items[i].Embedding, items[i].Model, items[i].Dims = vecs[i], local.Model(), local.Dims()
	}
	if err := rs.AddItems(ctx, items); err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		if _, err := rs.UpsertFact(ctx, memory.Fact{Tenant: "t", User: "u", Type: memory.FactPreference, Key: fmt.Sprintf("k%d", i), Value: "likes " + words[i%len(words)], Confidence: 0.8, UpdatedAt: time.Now()}, 200); err != nil {
			b.Fatal(err)
		}
	}
	q := memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c1"}, Text: "Any vegetarian dinner ideas in Lisbon on my budget?", CrossConversation: true}
	b.ResetTimer()
	for b.Loop() {
		if _, err := rl.Recaller.Recall(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEveryStoreGivesRecallItsReads: whatever the store wiring (the
// embedded file, PostgreSQL with Redis beside it), recall as openMemory
// wires it — over the store wrapped in the engine's cache of its reads —
// brings a recalled answer with the question before it. The store's turns
// around a hit and its term statistics reach recall as options the wiring
// passes (engine.RecallStore requires both, so a store or wrapper without
// them does not build); when they did not (a wrapper hid them from a type
// assertion), recall returned turns without their question or answer and
// ranked speaker names as content: LoCoMo coverage fell from 0.82 to 0.67.
func TestEveryStoreGivesRecallItsReads(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Default())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			counter, err := tokens.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			mem, err := openMemory(context.Background(), mk(t), nil, counter, nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mem.Close() })
			if mem.recall == nil {
				t.Fatal("recall is off in the default configuration")
			}
			ctx := context.Background()
			id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
			ex := memory.Exchange{ID: "ex-around", Identity: id, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: "What should I name my new greyhound puppy?"}},
				Reply: memory.Message{Role: "assistant", Content: "Call her Biscuit, after the colour of her coat."}}
			saveIndexed(t, ctx, mem, ex)
			got, err := mem.recall.Recaller.Recall(ctx, memory.RecallQuery{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "other"},
				Text: "Biscuit coat colour", CrossConversation: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range got.Items {
				if strings.Contains(it.Text, "Biscuit") && strings.Contains(it.Text, "greyhound") {
					return
				}
			}
			t.Errorf("the %s store's recall of the answer lacks the question before it: %+v", name, got.Items)
		})
	}
}

// TestLongHistoryGetsItsVectorsWithoutReindex: a client that starts by
// resending a long history has only the newest part embedded with the
// request (an exchange's embedding budget); the enricher embeds the rest
// while idle, so every message ends with a vector without an operator's
// `gateway reindex`, on both stores.
func TestLongHistoryGetsItsVectorsWithoutReindex(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := backfillConfig(mk(t))
			g := startGateway(t, cfg)
			// About 80 KB, more than twice the budget, in messages of
			// about 650 bytes: the backfill's work goes by items (a
			// round of it embeds backfillBatch of them), so fewer, longer
			// messages make the same point with a tenth of its rounds.
			const n = 120
			pad := strings.Repeat(" The garden gate squeaks in the evening.", 15)
			history := make([]map[string]any, 0, n+1)
			for i := range n / 2 {
				history = append(history, user(fmt.Sprintf("Turn %d: the lantern%d goes by the garden gate.%s", i, i, pad)),
					assistant(fmt.Sprintf("Noted, lantern%d by the gate.%s", i, pad)))
			}
			history = append(history, user("Where does lantern3 go?"))
			h := map[string]string{"X-Memory-User": "longhist", "X-Memory-Conversation": "c"}
			if r := chat(t, g.URL, h, false, history...); r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			owner := memory.Identity{Tenant: memory.DefaultTenant, User: "longhist", Conversation: "c"}
			waitForBackfill(t, g, owner, "Turn 0: the lantern0 goes by the garden gate."+pad, nil)
		})
	}
}

// backfillConfig is cfg for a test of the enricher's backfill of vectors:
// the local embedder (the test checks the backfill, not the encoder), and
// no compaction or fact extraction. Their side-model calls, which the
// fake upstream answers with chat text, fail after compacting a long
// history for tens of CPU-seconds under -race; each failure retries the
// enrichment round, whose hooks then run out of their deadline, and the
// enricher's pacing waits as long again before the next round: on a busy
// machine the idle backfill started minutes late, past the wait below.
func backfillConfig(cfg config.Config) config.Config {
	cfg.Recall.Embeddings.Provider = "local"
	cfg.Compaction.Enabled = false
	cfg.Recall.Extraction.Enabled = false
	return cfg
}

// waitForBackfill waits, for at most 5 minutes (the encoder under -race on a busy machine), until no stored item lacks
// a vector of g's embedder, the owner's oldest turn (stored without a
// vector by an embedding budget) is the best hit of a vector search for
// its own text, and ready (nil: nothing more) reports true.
func waitForBackfill(t *testing.T, g *testGateway, owner memory.Identity, oldest string, ready func() bool) {
	t.Helper()
	ctx, emb := context.Background(), g.mem.recall.Embedder
	vecs, err := emb.Embed(ctx, []string{oldest}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		hits, err := g.mem.store.SearchVector(ctx, memory.ItemQuery{Tenant: owner.Tenant, User: owner.User,
			Embedding: vecs[0], Model: emb.Model(), Dims: emb.Dims(), Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		left, err := g.mem.store.ItemsToEmbed(ctx, emb.Model(), emb.Dims(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) > 0 && hits[0].Text == oldest && len(left) == 0 && (ready == nil || ready()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5m: %d items without a vector; the oldest turn's vector search finds %d items", len(left), len(hits))
		}
		time.Sleep(250 * time.Millisecond) // each look is a vector search: leave the CPU to the backfill
	}
}
