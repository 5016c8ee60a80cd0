package recall

import (
	"cmp"
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
	"github.com/memgate/memgate/internal/ranking"
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

func (e *lateEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	e.calls++
	if e.lateFrom >= 0 && e.calls > e.lateFrom {
		return nil, ErrEmbeddingLate
	}
	return e.inner.Embed(ctx, texts, by)
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

// candidate is what the contract of reciprocal rank fusion says of one
// item of several rankings.
type candidate struct {
	first memory.Item // its first occurrence
	at    int         // where that is, counting through the lists in order
	rrf   float64     // Σ weight/(60+rank) over the lists, divided by Σ weight/61 (Σ weight at least 2)
	emb   []float32   // the first embedding any occurrence has
}

// fusion returns the candidates of lists by key, as Fuse's contract
// defines them.
func fusion(lists ...[]memory.Item) map[itemKey]*candidate {
	return weightedFusion(nil, lists...)
}

// weightedFusion is fusion with list i's reciprocal ranks times
// weights[i] (nil: all 1), normalised by the weights' sum (at least 2).
func weightedFusion(weights []float64, lists ...[]memory.Item) map[itemKey]*candidate {
	if weights == nil {
		weights = make([]float64, len(lists))
		for i := range weights {
			weights[i] = 1
		}
	}
	total := 0.0
	for _, w := range weights {
		total += w
	}
	out := map[itemKey]*candidate{}
	at := 0
	for li, l := range lists {
		for rank, it := range l {
			c, ok := out[keyOf(it)]
			if !ok {
				c = &candidate{first: it, at: at}
				out[keyOf(it)] = c
			}
			c.rrf += weights[li] / float64(rrfK+rank+1) / (max(2, total) / (rrfK + 1))
			if c.emb == nil {
				c.emb = it.Embedding
			}
			at++
		}
	}
	return out
}

// before reports whether a ranks before b: better score, then created
// later, then lower ID, then found first (at).
func before(a, b memory.Item, aAt, bAt int) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID), cmp.Compare(aAt, bAt)) < 0
}

// sameVector reports whether a and b are the same vector, bit for bit
// (NaN included), and both nil or neither.
func sameVector(a, b []float32) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// closeTo reports whether x and y agree to 12 digits.
func closeTo(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(1, math.Abs(y)) }

// TestFuseProperties: over random rankings, Fuse leaves its lists as they
// were and returns each item (kind, ref, chunk) once, with the fields of
// its first occurrence, the first embedding any occurrence has, and the
// normalised reciprocal-rank score, best first, newer first on ties, then
// by ID, then in the order found.
func TestFuseProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 1000 {
		byVec, byText := randomRankings(r, 16, t0)
		v, x := slices.Clone(byVec), slices.Clone(byText)
		got := Fuse(byVec, byText)
		if !reflect.DeepEqual(v, byVec) || !reflect.DeepEqual(x, byText) {
			t.Fatalf("trial %d: Fuse changed its lists", trial)
		}
		want := fusion(v, x)
		if len(got) != len(want) {
			t.Fatalf("trial %d: Fuse returned %d items, want %d distinct", trial, len(got), len(want))
		}
		for i, it := range got {
			c, ok := want[keyOf(it)]
			if !ok {
				t.Fatalf("trial %d: Fuse returned %v twice", trial, keyOf(it))
			}
			delete(want, keyOf(it))
			w := c.first
			w.Score, w.Embedding = it.Score, c.emb
			if !reflect.DeepEqual(it, w) {
				t.Fatalf("trial %d: item %d = %+v, want its first occurrence %+v", trial, i, it, w)
			}
			if !closeTo(it.Score, c.rrf) {
				t.Fatalf("trial %d: %v scores %v, want %v", trial, keyOf(it), it.Score, c.rrf)
			}
			if i > 0 && !before(got[i-1], it, fusion(v, x)[keyOf(got[i-1])].at, c.at) {
				t.Fatalf("trial %d: %v (%v) ranks before %v (%v)", trial, keyOf(got[i-1]), got[i-1].Score, keyOf(it), it.Score)
			}
		}
	}
}

// isDup reports whether a passage with text and embedding e repeats one
// with text kt and embedding ke: the same normalised text, or embeddings
// of one length closer than dupCosine.
func isDup(text string, e []float32, kt string, ke []float32) bool {
	return normText(text) == normText(kt) || len(e) > 0 && len(e) == len(ke) && Cosine(e, ke) > dupCosine
}

// TestSearchProperties searches random rankings (duplicates within and
// across the lists, text-only hits, excluded refs, vector matches below
// MinSimilarity, recency on and off, late embeddings of the query and of
// the results) with Searchers reused across searches, as a gateway's are,
// and wants what Search's contract says:
//   - at most topK passages, no excluded ref, each item once, with the
//     fields of its first occurrence;
//   - a vector match below MinSimilarity, or any vector match when the
//     query's embedding is late, counts for nothing;
//   - each scores its normalised reciprocal-rank score times the recency
//     weight of its age;
//   - best first, newer first on ties, then by ID;
//   - no passage repeats a better one (text or vector), and every
//     candidate left out repeats a better passage kept, or ranks after the
//     last of topK;
//   - every passage has an embedding of the embedder's dimensions, or,
//     when embedding the results is late, none.
func TestSearchProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const dims = 16
	local := NewLocal(dims)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
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
		s, ok := searchers[su]
		if !ok {
			embs[su] = &lateEmbedder{inner: local, lateFrom: su.lateFrom}
			s = NewSearcher(st, embs[su], SearchOptions{TopK: su.topK, MinSimilarity: su.minSim, RecencyHalfLife: su.halfLife})
			searchers[su] = s
		}
		embs[su].calls = 0
		q := SearchQuery{Tenant: "t", User: "u", Text: "porto vegan trip", Now: t0} // no time words: no time weight
		for range r.IntN(3) * r.IntN(8) {
			q.ExcludeRefs = append(q.ExcludeRefs, fmt.Sprintf("r%d", r.IntN(100)))
		}
		got, err := s.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("trial %d (%+v): %s\ngot %v", trial, su, fmt.Sprintf(format, args...), refs(got))
		}
		queryLate, resultsLate := su.lateFrom == 0, false
		var kept []memory.Item
		if !queryLate {
			for _, it := range st.byVec {
				if it.Score >= su.minSim {
					kept = append(kept, it)
				}
			}
		}
		cands := fusion(kept, st.byText)
		// With a query vector and a candidate vector to feed back, a
		// second vector ranking (the scripted store's same one) is fused
		// in.
		for _, c := range cands {
			if !queryLate && len(c.emb) == dims && ranking.Norm(c.emb) > 0 {
				cands = weightedFusion([]float64{1, 1, feedbackWeight}, kept, st.byText, kept)
				break
			}
		}
		for k := range cands {
			if slices.Contains(q.ExcludeRefs, k.ref) {
				delete(cands, k)
			}
		}
		// What a candidate scores and embeds as, by the contract.
		scoreOf := func(c *candidate) float64 {
			return c.rrf * RecencyWeight(t0.Sub(saidAt(c.first)), su.halfLife)
		}
		missing := 0
		for _, c := range cands {
			if len(c.emb) != dims {
				missing++
			}
		}
		resultsLate = missing > 0 && su.lateFrom == 1
		// Of the candidates without a vector, the best maxResultEmbeds
		// are embedded; the others stay without one.
		var unembedded []*candidate
		for _, c := range cands {
			if len(c.emb) != dims {
				unembedded = append(unembedded, c)
			}
		}
		slices.SortFunc(unembedded, func(a, b *candidate) int {
			x, y := a.first, b.first
			x.Score, y.Score = scoreOf(a), scoreOf(b)
			if before(x, y, a.at, b.at) {
				return -1
			}
			return 1
		})
		embedded := map[*candidate]bool{}
		for _, c := range unembedded[:min(len(unembedded), maxResultEmbeds)] {
			embedded[c] = true
		}
		embOf := func(c *candidate) []float32 {
			switch {
			case resultsLate || queryLate && missing > 0:
				return nil
			case len(c.emb) == dims:
				return c.emb
			case !embedded[c]:
				return nil
			}
			v, _ := local.Embed(context.Background(), []string{c.first.Text}, time.Time{})
			return v[0]
		}
		if len(got) > su.topK {
			fail("%d passages, topK %d", len(got), su.topK)
		}
		seen := map[itemKey]bool{}
		messages := map[[2]string]bool{}
		for i, it := range got {
			c, ok := cands[keyOf(it)]
			if it.Kind == KindMessage {
				if messages[[2]string{it.Conversation, it.Ref}] {
					fail("message %s/%s twice", it.Conversation, it.Ref)
				}
				messages[[2]string{it.Conversation, it.Ref}] = true
			}
			switch {
			case !ok:
				fail("%v is no candidate (excluded, filtered out or unknown)", keyOf(it))
			case seen[keyOf(it)]:
				fail("%v twice", keyOf(it))
			case !closeTo(it.Score, scoreOf(c)):
				fail("%v scores %v, want %v", keyOf(it), it.Score, scoreOf(c))
			case !sameVector(it.Embedding, embOf(c)):
				fail("%v has embedding %v, want %v", keyOf(it), it.Embedding, embOf(c))
			case i > 0 && !before(got[i-1], it, cands[keyOf(got[i-1])].at, c.at):
				fail("%v (%v) ranks before %v (%v)", keyOf(got[i-1]), got[i-1].Score, keyOf(it), it.Score)
			}
			seen[keyOf(it)] = true
			w := c.first
			w.Score, w.Embedding = it.Score, it.Embedding
			if !reflect.DeepEqual(it, w) {
				fail("%+v, want the fields of its first occurrence %+v", it, w)
			}
			for _, k := range got[:i] {
				if isDup(it.Text, it.Embedding, k.Text, k.Embedding) {
					fail("%v repeats %v", keyOf(it), keyOf(k))
				}
			}
		}
		for k, c := range cands {
			if seen[k] {
				continue
			}
			it := c.first
			it.Score = scoreOf(c)
			if len(got) == su.topK && before(got[len(got)-1], it, cands[keyOf(got[len(got)-1])].at, c.at) {
				continue // ranks after the last kept
			}
			dup := false
			for _, g := range got {
				sameMessage := g.Kind == KindMessage && it.Kind == KindMessage && g.Conversation == it.Conversation && g.Ref == it.Ref
				if before(g, it, cands[keyOf(g)].at, c.at) && (sameMessage || isDup(it.Text, embOf(c), g.Text, g.Embedding)) {
					dup = true
					break
				}
			}
			if !dup {
				fail("%v (score %v) left out, yet it repeats no better passage nor is another chunk of a better one's message", k, it.Score)
			}
		}
		// A second search gives the same: nothing is left behind in the
		// Searcher's reused space.
		embs[su].calls = 0
		again, err := s.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !sameItems(again, got) {
			fail("searched again: %v", refs(again))
		}
	}
}

// TestSearchConcurrent runs one Searcher's searches at once (each with
// its own scratch space): every one gives what a lone search gives.
func TestSearchConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	st := &scriptedStore{}
	st.byVec, st.byText = randomRankings(r, 16, t0)
	opts := SearchOptions{TopK: 30, RecencyHalfLife: 72 * time.Hour}
	q := SearchQuery{Tenant: "t", User: "u", Text: "porto vegan trip", Now: t0}
	want, err := NewSearcher(st, NewLocal(16), opts).Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 10 {
		t.Fatalf("only %d passages: the rankings test too little", len(want))
	}
	s := NewSearcher(st, NewLocal(16), opts)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 100 {
				got, err := s.Search(context.Background(), q)
				if err == nil && !sameItems(got, want) {
					err = fmt.Errorf("Search %v, alone %v", refs(got), refs(want))
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

// BenchmarkSearchRanking measures what Search does past the store: fuse
// two rankings of 121 items of 384 dimensions (half of them in both),
// re-weight by recency, sort and dedup to 81.
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
	vecs, err := emb.Embed(b.Context(), texts, time.Time{})
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
	qv, err := emb.Embed(b.Context(), []string{q.Text}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	// The query's vector comes from a cache, as a warm recall's does.
	s := NewSearcher(st, fixedEmbedder{emb, qv[0]}, SearchOptions{TopK: 81, RecencyHalfLife: 90 * 24 * time.Hour})
	b.ReportAllocs()
	start := cpuNow()
	for b.Loop() {
		if got, err := s.Search(b.Context(), q); err != nil || len(got) != 81 {
			b.Fatalf("%d items, %v", len(got), err)
		}
	}
	reportCPU(b, start)
}

// fixedEmbedder embeds every text as v, with inner's model and dims.
type fixedEmbedder struct {
	Embedder
	v []float32
}

func (e fixedEmbedder) Embed(_ context.Context, texts []string, by time.Time) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = e.v
	}
	return out, nil
}
