package recall

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// scriptedStore answers every search with a fresh copy of its lists.
type scriptedStore struct {
	byVec, byText []memory.Item
}

func (s *scriptedStore) SearchVector(context.Context, memory.ItemQuery) ([]memory.Item, error) {
	return slices.Clone(s.byVec), nil
}

func (s *scriptedStore) SearchText(context.Context, memory.ItemQuery) ([]memory.Item, error) {
	return slices.Clone(s.byText), nil
}

// lateEmbedder is inner, but late (ErrEmbeddingLate) for every call from
// the lateFrom-th on (counting from 0; negative: never).
type lateEmbedder struct {
	inner    Embedder
	lateFrom int
	calls    int
}

func (e *lateEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.calls++
	if e.lateFrom >= 0 && e.calls > e.lateFrom {
		return nil, ErrEmbeddingLate
	}
	return e.inner.Embed(ctx, texts)
}
func (e *lateEmbedder) Model() string { return e.inner.Model() }
func (e *lateEmbedder) Dims() int     { return e.inner.Dims() }

// itemKey identifies an item across rankings: its kind, ref and chunk.
type itemKey struct {
	kind, ref string
	chunk     int
}

// keyOf returns the itemKey of it.
func keyOf(it memory.Item) itemKey { return itemKey{it.Kind, it.Ref, it.Chunk} }

// fuseReference is Fuse as it was before candidates: items copied into a
// map-indexed slice and sorted with sort.SliceStable.
func fuseReference(lists ...[]memory.Item) []memory.Item {
	const best = 2.0 / (rrfK + 1)
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return nil
	}
	idx := make(map[itemKey]int, n)
	out := make([]memory.Item, 0, n)
	for _, l := range lists {
		for rank, it := range l {
			k := keyOf(it)
			add := 1.0 / float64(rrfK+rank+1) / best
			if i, ok := idx[k]; ok {
				out[i].Score += add
				if out[i].Embedding == nil {
					out[i].Embedding = it.Embedding
				}
				continue
			}
			idx[k] = len(out)
			it.Score = add
			out = append(out, it)
		}
	}
	sortByScoreReference(out)
	return out
}

// searchReference is Searcher.Search's ranking as it was before
// candidates (fuseReference, sortByScoreReference, dedupReference), for a
// Searcher over a store without term statistics.
func searchReference(ctx context.Context, s *Searcher, q SearchQuery) ([]memory.Item, error) {
	text := strings.TrimSpace(q.Text)
	if text == "" {
		return nil, nil
	}
	topK := s.opts.TopK
	if q.TopK > 0 {
		topK = q.TopK
	}
	iq := memory.ItemQuery{Tenant: q.Tenant, User: q.User, Conversation: q.Conversation, ExcludeRefs: q.ExcludeRefs,
		Model: s.emb.Model(), Dims: s.emb.Dims(), Text: text, Limit: max(20, topK+topK/2)}
	byText, err := s.store.SearchText(ctx, iq)
	if err != nil {
		return nil, err
	}
	vecs, err := s.emb.Embed(ctx, []string{text})
	lexical := noteLate(ctx, err)
	if err != nil && !lexical {
		return nil, err
	}
	var byVec []memory.Item
	if !lexical {
		iq.Embedding = vecs[0]
		if byVec, err = s.store.SearchVector(ctx, iq); err != nil {
			return nil, err
		}
	}
	kept := make([]memory.Item, 0, len(byVec))
	for _, it := range byVec {
		if it.Score >= s.opts.MinSimilarity {
			kept = append(kept, it)
		}
	}
	fused := fuseReference(kept, byText)
	excluded := make(map[string]bool, len(q.ExcludeRefs))
	for _, r := range q.ExcludeRefs {
		excluded[r] = true
	}
	out := fused[:0]
	for _, it := range fused {
		if excluded[it.Ref] {
			continue
		}
		it.Score *= RecencyWeight(q.Now.Sub(saidAt(it)), s.opts.RecencyHalfLife) * parseWhen(q.Text, q.Now).weight(saidAt(it), q.Now)
		out = append(out, it)
	}
	sortByScoreReference(out)
	var missing []string
	var at []int
	for i, it := range out {
		if len(it.Embedding) != s.emb.Dims() {
			missing = append(missing, it.Text)
			at = append(at, i)
		}
	}
	if len(missing) > 0 {
		vecs, err := s.emb.Embed(ctx, missing)
		if noteLate(ctx, err) {
			for i := range out {
				out[i].Embedding = nil
			}
			return oldDedup(out, topK), nil
		}
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			out[i].Embedding = vecs[j]
		}
	}
	return oldDedup(out, topK), nil
}

// oldDedup is dedupReference, empty but not nil when it keeps nothing,
// as Dedup always was.
func oldDedup(items []memory.Item, limit int) []memory.Item {
	if out := dedupReference(items, limit); out != nil {
		return out
	}
	return []memory.Item{}
}

// randomRankings returns a vector and a text ranking drawn from random
// items (randomItems: repeated texts, near and exact duplicate vectors,
// text-only hits, other lengths, non-finite values), with kinds, refs and
// chunks that repeat within and across the lists, tied scores, times and
// IDs, and said-at times on some.
func randomRankings(r *rand.Rand, dims int, t0 time.Time) (byVec, byText []memory.Item) {
	pool := randomItems(r, 1+r.IntN(200), dims)
	for i := range pool {
		pool[i].ID = int64(r.IntN(len(pool) + 1))
		pool[i].Kind = []string{KindMessage, KindSummary, KindFact}[r.IntN(3)]
		pool[i].Ref = fmt.Sprintf("r%d", r.IntN(len(pool)/2+1))
		pool[i].Chunk = r.IntN(2)
		pool[i].CreatedAt = t0.Add(-time.Duration(r.IntN(5)) * 24 * time.Hour)
		if r.IntN(3) == 0 {
			pool[i].SaidAt = t0.Add(-time.Duration(r.IntN(50)) * time.Hour)
		}
	}
	for range r.IntN(130) {
		it := pool[r.IntN(len(pool))]
		it.Score = float64(r.IntN(9)-2) / 8
		byVec = append(byVec, it)
	}
	for range r.IntN(130) {
		it := pool[r.IntN(len(pool))]
		it.Score = float64(r.IntN(6))
		byText = append(byText, it)
	}
	return byVec, byText
}

// sameItems reports whether a and b are the same items, scores to the bit.
func sameItems(a, b []memory.Item) bool {
	return len(a) == len(b) && reflect.DeepEqual(a, b) && slices.EqualFunc(a, b, func(x, y memory.Item) bool {
		return math.Float64bits(x.Score) == math.Float64bits(y.Score)
	})
}

// TestSearchMatchesReference compares Searcher.Search with the ranking it
// replaced on random rankings: duplicates within and across the lists,
// text-only hits, excluded refs, vector matches below MinSimilarity,
// recency on and off, late embeddings of the query and of the results.
func TestSearchMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const dims = 16
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// Searchers are reused across trials, as a gateway's is across
	// requests: what one search leaves in the scratch space must not
	// change the next.
	type setup struct {
		topK     int
		minSim   float64
		halfLife time.Duration
		lateFrom int
	}
	st := &scriptedStore{}
	searchers := map[setup]*Searcher{}
	embs := map[setup]*lateEmbedder{}
	for trial := range 1500 {
		st.byVec, st.byText = randomRankings(r, dims, t0)
		su := setup{topK: 1 + r.IntN(12)*r.IntN(8), minSim: []float64{0, 0.25, -1}[r.IntN(3)], lateFrom: []int{-1, -1, 0, 1}[r.IntN(4)]}
		if r.IntN(2) == 0 {
			su.halfLife = 72 * time.Hour
		}
		opts := SearchOptions{TopK: su.topK, MinSimilarity: su.minSim, RecencyHalfLife: su.halfLife}
		s, ok := searchers[su]
		if !ok {
			embs[su] = &lateEmbedder{inner: NewLocal(dims), lateFrom: su.lateFrom}
			s = NewSearcher(st, embs[su], opts)
			searchers[su] = s
		}
		embs[su].calls = 0
		q := SearchQuery{Tenant: "t", User: "u", Text: "porto vegan trip", Now: t0}
		for range r.IntN(3) * r.IntN(8) {
			q.ExcludeRefs = append(q.ExcludeRefs, fmt.Sprintf("r%d", r.IntN(100)))
		}
		got, err := s.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := searchReference(context.Background(), NewSearcher(st, &lateEmbedder{inner: NewLocal(dims), lateFrom: su.lateFrom}, opts), q)
		if err != nil {
			t.Fatal(err)
		}
		if !sameItems(got, want) {
			t.Fatalf("trial %d: Search %v, reference %v", trial, refs(got), refs(want))
		}
	}
}

// TestSearchConcurrent runs one Searcher's searches at once (each with
// its own scratch space): every one gives the reference's result.
func TestSearchConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	st := &scriptedStore{}
	st.byVec, st.byText = randomRankings(r, 16, t0)
	opts := SearchOptions{TopK: 30, RecencyHalfLife: 72 * time.Hour}
	q := SearchQuery{Tenant: "t", User: "u", Text: "porto vegan trip", Now: t0}
	want, err := searchReference(context.Background(), NewSearcher(st, NewLocal(16), opts), q)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSearcher(st, NewLocal(16), opts)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 100 {
				got, err := s.Search(context.Background(), q)
				if err == nil && !sameItems(got, want) {
					err = fmt.Errorf("Search %v, reference %v", refs(got), refs(want))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFuseMatchesReference compares Fuse with fuseReference on random
// rankings, and checks it leaves its lists as they were.
func TestFuseMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 1000 {
		byVec, byText := randomRankings(r, 16, t0)
		v, x := slices.Clone(byVec), slices.Clone(byText)
		got := Fuse(byVec, byText)
		if !reflect.DeepEqual(v, byVec) || !reflect.DeepEqual(x, byText) {
			t.Fatalf("trial %d: Fuse changed its lists", trial)
		}
		if want := fuseReference(v, x); !sameItems(got, want) {
			t.Fatalf("trial %d: Fuse %v, reference %v", trial, refs(got), refs(want))
		}
	}
}

// BenchmarkSearchRanking measures what Search does past the store: fuse
// two rankings of 121 items of 384 dimensions (half of them in both),
// re-weight by recency, sort and dedup to 81; and the same through the
// former pipeline (searchReference: its Dedup is the Cosine reference, so
// only the Search case says what recall costs).
func BenchmarkSearchRanking(b *testing.B) {
	words := strings.Fields(`sister viola greyhound Porto Lisbon vegan dinner recipe streaming subscription budget trip
		husband night shift rent euros car saving garden tomato bicycle commute office manager deadline doctor
		appointment knee running marathon coffee bakery weekend beach holiday flight hotel passport birthday`)
	r := rand.New(rand.NewPCG(41, 42))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	emb := NewLocal(384)
	pool := make([]memory.Item, 400)
	texts := make([]string, len(pool))
	for i := range texts {
		w := make([]string, 8+r.IntN(30))
		for j := range w {
			w[j] = words[r.IntN(len(words))]
		}
		texts[i] = "Mel: " + strings.Join(w, " ") + "."
	}
	vecs, err := emb.Embed(b.Context(), texts)
	if err != nil {
		b.Fatal(err)
	}
	for i := range pool {
		pool[i] = memory.Item{ID: int64(i + 1), Tenant: "t", User: "u", Conversation: "c", Kind: KindMessage,
			Ref: fmt.Sprintf("e%d:%d", i/2, i%2), Text: texts[i], Embedding: vecs[i], Model: emb.Model(), Dims: emb.Dims(),
			CreatedAt: t0.Add(-time.Duration(len(pool)-i) * time.Hour)}
	}
	perm := r.Perm(len(pool))
	st := &scriptedStore{}
	for k, i := range perm[:121] {
		it := pool[i]
		it.Score = 0.6 - float64(k)/400
		st.byVec = append(st.byVec, it)
	}
	for k, i := range perm[60:181] {
		it := pool[i]
		it.Score = 12 - float64(k)/20
		st.byText = append(st.byText, it)
	}
	q := SearchQuery{Tenant: "t", User: "u", Text: "what did my sister say about the vegan dinner in Lisbon?", Now: t0}
	qv, err := emb.Embed(b.Context(), []string{q.Text})
	if err != nil {
		b.Fatal(err)
	}
	// The query's vector comes from a cache, as a warm recall's does.
	s := NewSearcher(st, fixedEmbedder{emb, qv[0]}, SearchOptions{TopK: 81, RecencyHalfLife: 90 * 24 * time.Hour})
	for _, bm := range []struct {
		name   string
		search func(context.Context, SearchQuery) ([]memory.Item, error)
	}{{"Search", s.Search}, {"reference", func(ctx context.Context, q SearchQuery) ([]memory.Item, error) {
		return searchReference(ctx, s, q)
	}}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuNow()
			for b.Loop() {
				if got, err := bm.search(b.Context(), q); err != nil || len(got) != 81 {
					b.Fatalf("%d items, %v", len(got), err)
				}
			}
			reportCPU(b, start)
		})
	}
}

// fixedEmbedder embeds every text as v, with inner's model and dims.
type fixedEmbedder struct {
	Embedder
	v []float32
}

func (e fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = e.v
	}
	return out, nil
}
