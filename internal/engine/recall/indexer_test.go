package recall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func itemRefs(st *fakeStore, kind string) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []string
	for _, it := range st.items {
		if it.Kind == kind {
			out = append(out, it.Ref+"#"+string(rune('0'+it.Chunk)))
		}
	}
	sort.Strings(out)
	return out
}

func TestIndexerAfterSave(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	msg := func(role, text string) memory.Message { return memory.Message{Role: role, Content: text} }
	long := strings.Repeat("I want to save R$ 5.000 by June and keep the rent under 1.200 euros. ", 40)
	tests := []struct {
		name string
		ex   memory.Exchange
		res  memory.SaveResult
		want []string
	}{
		{"turn and reply", memory.Exchange{ID: "e1", Identity: id, At: at,
			Turn: []memory.Message{msg("user", "I am vegetarian")}, Reply: msg("assistant", "Noted!")},
			memory.SaveResult{Inserted: 2}, []string{"e1:0#0", "e1:1#0"}},
		{"unseen prior suffix only", memory.Exchange{ID: "e2", Identity: id, At: at,
			Prior: []memory.Message{msg("user", "old"), msg("assistant", "stored before"), msg("user", "new to us"), msg("assistant", "also new")},
			Turn:  []memory.Message{msg("user", "next")}, Reply: msg("assistant", "ok")},
			memory.SaveResult{Inserted: 4}, []string{"e2:0#0", "e2:1#0", "e2:2#0", "e2:3#0"}},
		{"tool messages, tool calls and empty text skipped", memory.Exchange{ID: "e3", Identity: id, At: at,
			Prior: []memory.Message{msg("user", "weather?"), msg("assistant", "[tool_call weather({\"city\":\"Lisbon\"})]")},
			Turn:  []memory.Message{msg("tool", "18C")}, Reply: msg("assistant", "  ")},
			memory.SaveResult{Inserted: 4}, []string{"e3:0#0"}},
		{"long reply chunked", memory.Exchange{ID: "e4", Identity: id, At: at,
			Turn: []memory.Message{msg("user", "plan?")}, Reply: msg("assistant", long)},
			memory.SaveResult{Inserted: 2}, []string{"e4:0#0", "e4:1#0", "e4:1#1", "e4:1#2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			ix := NewIndexer(st, NewLocal(64), nil)
			for range 2 { // idempotent: a second run changes nothing
				if err := ix.AfterSave(context.Background(), tt.ex, tt.res); err != nil {
					t.Fatal(err)
				}
			}
			if got := itemRefs(st, KindMessage); !eqStrings(got, tt.want) {
				t.Fatalf("items = %v, want %v", got, tt.want)
			}
			for _, it := range st.items {
				if it.Model != LocalModel || it.Dims != 64 || len(it.Embedding) != 64 || it.Tenant != "t" || it.User != "u" || it.Conversation != "c" || !it.CreatedAt.Equal(at) {
					t.Fatalf("item %s badly recorded: %+v", it.Ref, it)
				}
			}
		})
	}
}

func TestIndexerDuplicateReadsKeysBack(t *testing.T) {
	st := newFakeStore()
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	st.messages["t/u/c"] = []memory.Message{
		{Key: "e0:0", Role: "user", Content: "earlier"},
		{Key: "e1:0", Role: "user", Content: "resent history"},
		{Key: "e1:1", Role: "user", Content: "I am vegetarian"},
		{Key: "e1:2", Role: "assistant", Content: "Noted"},
		{Key: "e10:0", Role: "user", Content: "other exchange with a longer id"},
	}
	ix := NewIndexer(st, NewLocal(32), nil)
	ex := memory.Exchange{ID: "e1", Identity: id, Turn: []memory.Message{{Role: "user", Content: "I am vegetarian"}}, Reply: memory.Message{Role: "assistant", Content: "Noted"}}
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	if got := itemRefs(st, KindMessage); !eqStrings(got, []string{"e1:0#0", "e1:1#0", "e1:2#0"}) {
		t.Fatalf("items = %v", got)
	}
}

func TestIndexerSummaryAndFreshFacts(t *testing.T) {
	at := time.Now()
	st := newFakeStore()
	st.summary["t/u/c"] = memory.Summary{Conversation: "c", Version: 3, Text: "The user is vegetarian.", CreatedAt: at}
	st.facts = []memory.Fact{
		{ID: 7, Tenant: "t", User: "u", Type: memory.FactProfile, Key: "diet", Value: "vegetarian", UpdatedAt: at},
		{ID: 8, Tenant: "t", User: "u", Type: memory.FactGoal, Key: "car", Value: "buy a car", UpdatedAt: at.Add(-time.Hour)},
	}
	ix := NewIndexer(st, NewLocal(32), nil)
	ex := memory.Exchange{ID: "e", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: at, Reply: memory.Message{Role: "assistant", Content: "hi"}}
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 1}); err != nil {
		t.Fatal(err)
	}
	if got := itemRefs(st, KindSummary); !eqStrings(got, []string{"c:v3#0"}) {
		t.Fatalf("summary items = %v", got)
	}
	if got := itemRefs(st, KindFact); !eqStrings(got, []string{"7#0"}) {
		t.Fatalf("fact items = %v, want only the fact stated with this exchange", got)
	}
}

// TestIndexerDatesSummaryOfPastHistory: the summary written while history
// said in 2023 is imported today is recalled as of the newest message it
// covers, not as of the import; a summary of live talk is as of its latest
// exchange, moments before it was written.
func TestIndexerDatesSummaryOfPastHistory(t *testing.T) {
	written := time.Now().UTC()
	said := time.Date(2023, 5, 7, 18, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		at   time.Time // the exchange's time
		msg  time.Time // its messages' CreatedAt (zero: none)
		want time.Time
	}{
		{"imported", said.Add(-time.Hour), said, said},
		{"live", written.Add(-time.Second), time.Time{}, written.Add(-time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			st.summary["t/u/c"] = memory.Summary{Conversation: "c", Version: 1, Text: "They talked about the trip.", CreatedAt: written}
			ix := NewIndexer(st, NewLocal(32), nil)
			ex := memory.Exchange{ID: "e", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: tt.at,
				Turn:  []memory.Message{{Role: "user", Content: "we stayed by the harbour", CreatedAt: tt.msg}},
				Reply: memory.Message{Role: "assistant", Content: "lovely", CreatedAt: tt.msg}}
			if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
				t.Fatal(err)
			}
			for _, it := range st.items {
				if it.Kind == KindSummary && (!it.SaidAt.Equal(tt.want) || !it.CreatedAt.Equal(written)) {
					t.Fatalf("summary item said %v created %v, want said %v created %v", it.SaidAt, it.CreatedAt, tt.want, written)
				}
			}
			if got := itemRefs(st, KindSummary); len(got) != 1 {
				t.Fatalf("summary items %v", got)
			}
		})
	}
}

func TestIndexerReturnsFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*fakeStore, *countingEmbedder)
	}{
		{"embedder down", func(_ *fakeStore, e *countingEmbedder) { e.err = errors.New("503") }},
		{"store down", func(s *fakeStore, _ *countingEmbedder) { s.failAdd = memory.ErrUnavailable }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, emb := newFakeStore(), &countingEmbedder{Embedder: NewLocal(8)}
			tt.setup(st, emb)
			ex := memory.Exchange{ID: "e", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Reply: memory.Message{Role: "assistant", Content: "hi"}}
			if err := NewIndexer(st, emb, nil).AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 1}); err == nil {
				t.Fatal("a failure must be returned so the worker retries")
			}
		})
	}
}

// TestIndexerBatchMatchesOneByOne: a batch indexes the same items as the
// exchanges one at a time, with one embedding call, and an unchanged
// summary is embedded once, not once per exchange.
func TestIndexerBatchMatchesOneByOne(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	setup := func() (*fakeStore, *countingEmbedder, *Indexer) {
		st, emb := newFakeStore(), &countingEmbedder{Embedder: NewLocal(32)}
		st.summary["t/u/c"] = memory.Summary{Conversation: "c", Version: 2, Text: "The user saves for a car.", CreatedAt: at}
		st.facts = []memory.Fact{
			{ID: 7, Tenant: "t", User: "u", Type: memory.FactProfile, Key: "diet", Value: "vegetarian", UpdatedAt: at.Add(time.Minute)},
			{ID: 8, Tenant: "t", User: "u", Type: memory.FactGoal, Key: "car", Value: "buy a car", UpdatedAt: at.Add(-time.Hour)},
			{ID: 9, Tenant: "t", User: "v", Type: memory.FactProfile, Key: "city", Value: "Porto", UpdatedAt: at},
		}
		return st, emb, NewIndexer(st, emb, nil)
	}
	var exs []memory.Exchange
	var results []memory.SaveResult
	for i, conv := range []string{"c", "c", "d", "c"} {
		user := "u"
		if conv == "d" {
			user = "v"
		}
		exs = append(exs, memory.Exchange{ID: fmt.Sprint("e", i), Identity: memory.Identity{Tenant: "t", User: user, Conversation: conv},
			At:   at.Add(time.Duration(i) * time.Second),
			Turn: []memory.Message{{Role: "user", Content: fmt.Sprint("question ", i)}}, Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", i)}})
		results = append(results, memory.SaveResult{Inserted: 2})
	}
	results = append(results[:2], memory.SaveResult{Dropped: true}, results[3])

	oneSt, oneEmb, one := setup()
	for i, ex := range exs {
		if results[i].Dropped {
			continue // WithHooks runs no hook for a dropped exchange
		}
		if err := one.AfterSave(context.Background(), ex, results[i]); err != nil {
			t.Fatal(err)
		}
	}
	batchSt, batchEmb, batch := setup()
	if err := batch.AfterSaveBatch(context.Background(), exs, results); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{KindMessage, KindSummary, KindFact} {
		if a, b := itemRefs(oneSt, kind), itemRefs(batchSt, kind); !eqStrings(a, b) || len(a) == 0 {
			t.Fatalf("%s items: one by one %v, batch %v", kind, a, b)
		}
	}
	if got := itemRefs(batchSt, KindMessage); len(got) != 6 {
		t.Fatalf("message items = %v, want the 3 kept exchanges' 6 messages", got)
	}
	if got := itemRefs(batchSt, KindFact); !eqStrings(got, []string{"7#0"}) {
		t.Fatalf("fact items = %v, want only u's fact stated during the batch (v's exchange was dropped)", got)
	}
	// One by one: 6 messages + the summary once (not 3 times) + fact 7 each time.
	if oneEmb.texts != 6+1+3 {
		t.Fatalf("one by one embedded %d texts, want 10 (the summary only once)", oneEmb.texts)
	}
	if batchEmb.texts != 6+1+1 {
		t.Fatalf("batch embedded %d texts, want 8", batchEmb.texts)
	}
	// A new summary version is indexed again.
	batchSt.summary["t/u/c"] = memory.Summary{Conversation: "c", Version: 3, Text: "The user saves for a red car.", CreatedAt: at.Add(time.Hour)}
	if err := batch.AfterSave(context.Background(), exs[3], memory.SaveResult{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	if got := itemRefs(batchSt, KindSummary); !eqStrings(got, []string{"c:v2#0", "c:v3#0"}) {
		t.Fatalf("summary items = %v", got)
	}
}

// failAfterEmbedder embeds its first ok calls and fails the rest.
type failAfterEmbedder struct {
	Embedder
	ok    int
	calls int
}

func (f *failAfterEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	f.calls++
	if f.calls > f.ok {
		return nil, ErrEmbeddingLate
	}
	return f.Embedder.Embed(ctx, texts, by)
}

// TestIndexerKeepsWhatItEmbeddedAndStoresTheRestUnembedded: a round of more
// than indexChunk items whose embedder fails half-way stores the chunks
// embedded so far with their vectors and the rest without (full text finds
// them; reindex embeds them), and still returns the failure so the round
// is tried again.
func TestIndexerKeepsWhatItEmbeddedAndStoresTheRestUnembedded(t *testing.T) {
	st := newFakeStore()
	emb := &failAfterEmbedder{Embedder: NewLocal(16), ok: 1}
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	var exs []memory.Exchange
	var res []memory.SaveResult
	for i := range indexChunk { // two messages each: two chunks' worth
		exs = append(exs, memory.Exchange{ID: fmt.Sprintf("e%d", i), Identity: id,
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("question number %d", i)}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("answer number %d", i)}})
		res = append(res, memory.SaveResult{Inserted: 2})
	}
	err := NewIndexer(st, emb, nil).AfterSaveBatch(context.Background(), exs, res)
	if !errors.Is(err, ErrEmbeddingLate) {
		t.Fatalf("err = %v, want the embedding failure", err)
	}
	var with, without int
	for _, it := range st.items {
		switch {
		case len(it.Embedding) == 16 && it.Model == LocalModel && it.Dims == 16:
			with++
		case it.Embedding == nil && it.Model == "" && it.Dims == 0:
			without++
		default:
			t.Fatalf("item %s: embedding %d dims, model %q, dims %d", it.Ref, len(it.Embedding), it.Model, it.Dims)
		}
	}
	if with != indexChunk || without != indexChunk {
		t.Fatalf("%d items with vectors and %d without, want %d and %d", with, without, indexChunk, indexChunk)
	}
	// Tried again with the embedder back, every item gets its vector.
	emb.ok = 100
	if err := NewIndexer(st, emb, nil).AfterSaveBatch(context.Background(), exs, res); err != nil {
		t.Fatal(err)
	}
	for _, it := range st.items {
		if len(it.Embedding) != 16 {
			t.Fatalf("item %s still without a vector after the retry", it.Ref)
		}
	}
}

// A message longer than embeddedChunks chunks is indexed whole, but only
// its first embeddedChunks chunks are embedded: a 2 MiB body must not cost
// embedding work in proportion to its size. Full text still finds the rest.
func TestIndexerEmbedsABoundedPartOfALongMessage(t *testing.T) {
	st, emb := newFakeStore(), &countingEmbedder{Embedder: NewLocal(16)}
	ix := NewIndexer(st, emb, nil)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	var b strings.Builder
	for i := range 3 * embeddedChunks * 40 {
		fmt.Fprintf(&b, "Sentence number %d talks about the harbour and the boats. ", i)
	}
	chunks := len(Chunk(b.String()))
	if chunks <= 2*embeddedChunks {
		t.Fatalf("test text makes %d chunks, want more than %d", chunks, 2*embeddedChunks)
	}
	ex := memory.Exchange{ID: "e1", Identity: id, At: time.Now(),
		Turn: []memory.Message{{Role: "user", Content: b.String()}}, Reply: memory.Message{Role: "assistant", Content: "ok"}}
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
		t.Fatal(err)
	}
	emb.mu.Lock()
	embedded := emb.texts
	emb.mu.Unlock()
	if want := embeddedChunks + 1; embedded != want { // the long turn's first chunks and the reply
		t.Fatalf("embedded %d texts, want %d", embedded, want)
	}
	var withVec, without int
	for _, it := range st.items {
		if it.Ref != "e1:0" {
			continue
		}
		if len(it.Embedding) > 0 {
			withVec++
			if it.Chunk >= embeddedChunks {
				t.Fatalf("chunk %d embedded, want only the first %d", it.Chunk, embeddedChunks)
			}
		} else {
			without++
			if it.Model != "" || it.Dims != 0 {
				t.Fatalf("chunk %d stored without a vector names model %q dims %d", it.Chunk, it.Model, it.Dims)
			}
		}
	}
	if withVec != embeddedChunks || withVec+without != chunks {
		t.Fatalf("stored %d chunks with vectors and %d without, want %d and %d", withVec, without, embeddedChunks, chunks-embeddedChunks)
	}
	hits, err := st.SearchText(context.Background(), memory.ItemQuery{Tenant: "t", User: "u", Text: fmt.Sprintf("number %d", 3*embeddedChunks*40-1), Limit: 5})
	if err != nil || len(hits) == 0 {
		t.Fatalf("full text does not find the last chunk: %v, %v", hits, err)
	}
}

// TestIndexerLeavesExtractiveSummariesOut: a summary a model wrote (or one
// stored before the writer was recorded) is indexed; one the extractive
// summariser wrote is not, its lines being the messages' own sentences.
func TestIndexerLeavesExtractiveSummariesOut(t *testing.T) {
	for _, tt := range []struct {
		by   string
		want []string
	}{
		{memory.SummariserModel, []string{"c:v3#0"}},
		{"", []string{"c:v3#0"}},
		{memory.SummariserExtractive, nil},
	} {
		t.Run(cmp.Or(tt.by, "unrecorded"), func(t *testing.T) {
			st := newFakeStore()
			st.summary["t/u/c"] = memory.Summary{Conversation: "c", Version: 3, Text: "User: I am vegetarian.", Summariser: tt.by, CreatedAt: time.Now()}
			ix := NewIndexer(st, NewLocal(32), nil)
			ex := memory.Exchange{ID: "e", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(), Reply: memory.Message{Role: "assistant", Content: "hi"}}
			if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 1}); err != nil {
				t.Fatal(err)
			}
			if got := itemRefs(st, KindSummary); !eqStrings(got, tt.want) {
				t.Fatalf("summary items = %v, want %v", got, tt.want)
			}
		})
	}
}
