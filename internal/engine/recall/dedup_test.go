package recall

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// textKey is what makes two passages' texts the same for dedup: equal
// keys, the text lower-cased with punctuation dropped (the words of
// tokenize, one space apart).
func textKey(s string) string { return strings.Join(tokenize(s), " ") }

// nearVectors reports whether two passages' vectors make them the same for
// dedup: both present, of one length, with Cosine above 0.95.
func nearVectors(a, b []float32) bool {
	return len(a) > 0 && len(a) == len(b) && Cosine(a, b) > dupCosine
}

// checkDedup checks what Dedup(items, limit) must give, got: a walk of
// items in order that keeps an item unless it has the text of a kept one
// or a vector near a kept one's (dropped items never count), and stops
// once limit are kept (limit <= 0: never). That is:
//   - got is a subsequence of items, each with its item's fields and
//     score, at most limit long when limit > 0;
//   - no kept item has the text of, or a vector near, one kept before it;
//   - every item the walk passed over (all of them, unless it stopped at
//     the limit: then those before the last kept one) has the text of, or
//     a vector near, an item kept before it.
func checkDedup(t *testing.T, items []memory.Item, limit int, got []memory.Item) {
	t.Helper()
	newDedupOracle(items).check(t, limit, got)
}

// dedupOracle is checkDedup over one list of items, which remembers what
// it compared: the property tests check each list at several limits, and
// tokenizing texts and taking cosines again for every pair was most of
// their time under -race.
type dedupOracle struct {
	items []memory.Item
	keys  map[int]string  // textKey of items[i]
	near  map[[2]int]bool // nearVectors of items[i] and items[j], i > j
}

func newDedupOracle(items []memory.Item) *dedupOracle {
	return &dedupOracle{items: items, keys: map[int]string{}, near: map[[2]int]bool{}}
}

// key is textKey of items[i].
func (o *dedupOracle) key(i int) string {
	k, ok := o.keys[i]
	if !ok {
		k = textKey(o.items[i].Text)
		o.keys[i] = k
	}
	return k
}

// dupOfKept reports why items[i] repeats one of the items at kept (each
// before it), if it does.
func (o *dedupOracle) dupOfKept(i int, kept []int) (string, bool) {
	it := o.items[i]
	for _, j := range kept {
		k := o.items[j]
		if o.key(i) == o.key(j) {
			return "the text of " + k.Ref, true
		}
		near, ok := o.near[[2]int{i, j}]
		if !ok {
			near = nearVectors(it.Embedding, k.Embedding)
			o.near[[2]int{i, j}] = near
		}
		if near {
			return fmt.Sprintf("a vector at cosine %v with %s", Cosine(it.Embedding, k.Embedding), k.Ref), true
		}
	}
	return "", false
}

// check is checkDedup(t, o.items, limit, got).
func (o *dedupOracle) check(t *testing.T, limit int, got []memory.Item) {
	t.Helper()
	items := o.items
	if limit > 0 && len(got) > limit {
		t.Fatalf("kept %d, limit %d", len(got), limit)
	}
	// at[k] is the index in items of kept item k.
	at := make([]int, len(got))
	next := 0
	for k, g := range got {
		for next < len(items) && items[next].Ref != g.Ref {
			next++
		}
		if next == len(items) {
			t.Fatalf("kept %v: not a subsequence of the items %v", refs(got), refs(items))
		}
		if want := items[next]; g.Text != want.Text || g.Score != want.Score || !sameVector(g.Embedding, want.Embedding) {
			t.Fatalf("kept item %s changed: %+v, was %+v", g.Ref, g, want)
		}
		at[k] = next
		next++
	}
	// Each kept item is items[at[k]], field for field (checked above).
	for k := range got {
		if why, dup := o.dupOfKept(at[k], at[:k]); dup {
			t.Fatalf("kept %s, which has %s (kept before it)", got[k].Ref, why)
		}
	}
	walked := len(items)
	if limit > 0 && len(got) == limit {
		walked = at[len(at)-1]
	}
	k := 0
	for i := range walked {
		if k < len(at) && at[k] == i {
			k++
			continue
		}
		if _, dup := o.dupOfKept(i, at[:k]); !dup {
			t.Fatalf("dropped %s (limit %d), which repeats no item kept before it; kept %v", items[i].Ref, limit, refs(got))
		}
	}
}

// randUnit returns a random vector of length 1 (in float64, then rounded).
func randUnit(r *rand.Rand, dims int) []float64 {
	v := make([]float64, dims)
	var s float64
	for i := range v {
		v[i] = r.NormFloat64()
		s += v[i] * v[i]
	}
	for i := range v {
		v[i] /= math.Sqrt(s)
	}
	return v
}

// atCosine returns a float32 vector whose cosine with base is about c:
// base·c plus a random direction orthogonal to base times sin.
func atCosine(r *rand.Rand, base []float32, c float64) []float32 {
	b := make([]float64, len(base))
	var bn float64
	for i, x := range base {
		b[i] = float64(x)
		bn += b[i] * b[i]
	}
	bn = math.Sqrt(bn)
	for i := range b {
		b[i] /= bn
	}
	o := randUnit(r, len(base))
	var d float64
	for i := range o {
		d += o[i] * b[i]
	}
	var on float64
	for i := range o {
		o[i] -= d * b[i]
		on += o[i] * o[i]
	}
	on = math.Sqrt(on)
	s := math.Sqrt(1 - c*c)
	out := make([]float32, len(base))
	for i := range out {
		out[i] = float32(c*b[i] + s*o[i]/on)
	}
	return out
}

// randomItems returns n items whose texts repeat a few phrases with other
// case and punctuation, and whose vectors are random, near earlier ones
// (some within a hair of the 0.95 threshold), scaled, zero, missing, of
// another length, tiny, huge or not finite.
func randomItems(r *rand.Rand, n, dims int) []memory.Item {
	phrases := []string{"I live in Porto", "i LIVE in porto!", "Vegan, since 2019.", "vegan since 2019", "Olá, São Paulo",
		"OLÁ — SÃO PAULO", "İstanbul trip", "the dog", "", "  ...  ", "a\xffb", "Ⅻ Roman", "ⓐ circled", "Straße"}
	items := make([]memory.Item, n)
	for i := range items {
		it := memory.Item{Kind: KindMessage, Ref: fmt.Sprintf("r%d", i)}
		if r.IntN(3) == 0 {
			it.Text = phrases[r.IntN(len(phrases))]
		} else {
			it.Text = fmt.Sprintf("passage %d about %s", i, phrases[r.IntN(len(phrases))])
		}
		var v []float32
		switch k := r.IntN(20); {
		case k < 8 || i == 0:
			u := randUnit(r, dims)
			v = make([]float32, dims)
			for j := range v {
				v[j] = float32(u[j])
			}
		case k < 14: // near an earlier vector: around, or right at, 0.95
			base := items[r.IntN(i)].Embedding
			if nv, _ := normOf(base, nil); len(base) != dims || !nv.fast {
				base = make([]float32, dims)
				base[r.IntN(dims)] = 1
			}
			c := []float64{0.99, 0.96, 0.94, 0.9, 0.95, 0.95 + 1e-7, 0.95 - 1e-7, 0.95 + 1e-5, 0.95 - 1e-5}[r.IntN(9)]
			v = atCosine(r, base, c)
		case k == 14:
			v = make([]float32, dims) // zero
		case k == 15:
			v = nil // a text-only hit
		case k == 16:
			u := randUnit(r, 8) // another model's length
			v = make([]float32, 8)
			for j := range v {
				v[j] = float32(u[j])
			}
		case k == 17: // a copy of an earlier vector, scaled tiny, huge or by 3
			base := items[r.IntN(i)].Embedding
			scale := []float32{1e-20, 1e18, 3, 1e-16}[r.IntN(4)]
			v = make([]float32, len(base))
			for j := range v {
				v[j] = base[j] * scale
			}
		case k == 18: // an exact copy
			v = items[r.IntN(i)].Embedding
		default: // not finite
			v = make([]float32, dims)
			v[0] = []float32{float32(math.Inf(1)), float32(math.NaN())}[r.IntN(2)]
		}
		it.Embedding = v
		items[i] = it
	}
	return items
}

// TestDedupProperties checks Dedup against what it must do (checkDedup)
// on random items (texts repeating a few phrases, vectors near earlier
// ones and around the threshold, of other lengths, zero, missing, tiny,
// huge or not finite), limits and vector lengths, with fixed seeds.
func TestDedupProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 400 {
		dims := []int{384, 16, 17, 3, 1536, 100, 130}[trial%7]
		n := r.IntN(120)
		items := randomItems(r, n, dims)
		for i := range items {
			items[i].Score = float64(n - i)
		}
		oracle := newDedupOracle(items)
		for _, limit := range []int{-1, 0, 1, 5, n / 2, n, n + 3} {
			oracle.check(t, limit, Dedup(items, limit))
		}
	}
}

// TestDedupPropertiesNearTheThreshold checks Dedup (checkDedup) on
// vectors longer than one chunk whose weight is all in their first
// dupChunk dimensions, many pairs within a hair of the 0.95 threshold:
// there the bound on a pair's cosine after the first chunk is tight, so a
// wrong early rejection would show.
func TestDedupPropertiesNearTheThreshold(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for trial := range 300 {
		dims := []int{384, 130, 1536}[trial%3]
		n := 2 + r.IntN(60)
		items := make([]memory.Item, n)
		for i := range items {
			head := make([]float32, dupChunk)
			if i == 0 || r.IntN(3) == 0 {
				for j, x := range randUnit(r, dupChunk) {
					head[j] = float32(x)
				}
			} else {
				c := 0.95 + []float64{1e-7, -1e-7, 1e-5, -1e-5, 1e-4, -1e-4, 1e-3}[r.IntN(7)]
				head = atCosine(r, items[r.IntN(i)].Embedding[:dupChunk], c)
			}
			v := make([]float32, dims)
			copy(v, head)
			items[i] = memory.Item{Kind: KindMessage, Ref: fmt.Sprintf("r%d", i), Text: fmt.Sprintf("passage %d", i),
				Embedding: v, Score: float64(n - i)}
		}
		oracle := newDedupOracle(items)
		for _, limit := range []int{0, 1 + r.IntN(n)} {
			oracle.check(t, limit, Dedup(items, limit))
		}
	}
}

// TestDedupExamples states what dedup keeps on small cases.
func TestDedupExamples(t *testing.T) {
	x, y, z := []float32{1, 0, 0}, []float32{0, 1, 0}, []float32{0, 0, 1}
	tests := []struct {
		name  string
		items []memory.Item
		limit int
		want  []string
	}{
		{"the first of two texts equal but for case and punctuation", []memory.Item{
			{Ref: "a", Text: "I live in Porto.", Embedding: x},
			{Ref: "b", Text: "i LIVE in porto!!", Embedding: y},
		}, 0, []string{"a"}},
		{"texts differing by a word are not the same", []memory.Item{
			{Ref: "a", Text: "I live in Porto", Embedding: x},
			{Ref: "b", Text: "I lived in Porto", Embedding: y},
		}, 0, []string{"a", "b"}},
		{"a vector above 0.95 to a kept one is dropped; at or below it is kept", []memory.Item{
			{Ref: "a", Text: "one", Embedding: x},
			{Ref: "near", Text: "two", Embedding: []float32{1, 0.3, 0}},    // cosine 0.958
			{Ref: "apart", Text: "three", Embedding: []float32{1, 0.4, 0}}, // cosine 0.928
		}, 0, []string{"a", "apart"}},
		{"a dropped item never drops another", []memory.Item{
			{Ref: "a", Text: "one", Embedding: x},
			{Ref: "b", Text: "two", Embedding: []float32{1, 0.3, 0}},   // near a: dropped
			{Ref: "c", Text: "three", Embedding: []float32{1, 0.7, 0}}, // near b (0.98), not a (0.82): kept
			{Ref: "d", Text: "TWO", Embedding: z},                      // b's text, but b was dropped: kept
		}, 0, []string{"a", "c", "d"}},
		{"items without a vector, or of another length, are compared by text alone", []memory.Item{
			{Ref: "a", Text: "one", Embedding: x},
			{Ref: "none", Text: "two"},
			{Ref: "short", Text: "three", Embedding: []float32{1, 0}},
			{Ref: "none-again", Text: "Two!"},
		}, 0, []string{"a", "none", "short"}},
		{"zero vectors are near nothing, not even each other", []memory.Item{
			{Ref: "a", Text: "one", Embedding: []float32{0, 0, 0}},
			{Ref: "b", Text: "two", Embedding: []float32{0, 0, 0}},
		}, 0, []string{"a", "b"}},
		{"the walk stops at the limit", []memory.Item{
			{Ref: "a", Text: "one", Embedding: x},
			{Ref: "dup", Text: "ONE", Embedding: y},
			{Ref: "b", Text: "two", Embedding: y},
			{Ref: "c", Text: "three", Embedding: z},
		}, 2, []string{"a", "b"}},
		{"a negative limit is no limit", []memory.Item{
			{Ref: "a", Text: "one", Embedding: x},
			{Ref: "b", Text: "two", Embedding: y},
		}, -1, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Dedup(tt.items, tt.limit)
			if !eqStrings(refs(got), tt.want) {
				t.Fatalf("Dedup = %v, want %v", refs(got), tt.want)
			}
			checkDedup(t, tt.items, tt.limit, got)
		})
	}
}

// TestNearDupMatchesCosine compares nearDup with Cosine > 0.95 on pairs
// around the threshold, where the float32 estimate alone could err, of
// vectors scaled from 1e-16 to 1e16, some with all their weight in one
// chunk (so the early rejection's bounds are far from even).
func TestNearDupMatchesCosine(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var dups, near int
	for _, dims := range []int{384, 1536, 5, 16, 100, 130} {
		for range 2000 {
			a := make([]float32, dims)
			for i, x := range randUnit(r, dims) {
				a[i] = float32(x)
			}
			if r.IntN(3) == 0 { // all in one chunk of dupChunk dimensions
				lo := r.IntN(dims/dupChunk+1) * dupChunk
				for i := range a {
					if i < lo || i >= lo+dupChunk {
						a[i] = 0
					}
				}
				if lo >= dims {
					a[dims-1] = 1
				}
			}
			c := 0.95 + (r.Float64()-0.5)*[]float64{1e-3, 1e-6, 1e-9, 1e-12}[r.IntN(4)]
			b := atCosine(r, a, c)
			// Scale b within the range the estimate is used for, near
			// its ends too, and beyond it.
			scale := []float32{1, 3, 1e-14, 2e14, 1e-16, 1e16}[r.IntN(6)]
			for i := range b {
				b[i] *= scale
			}
			want := Cosine(a, b) > dupCosine
			na, _ := normOf(a, nil)
			nb, _ := normOf(b, nil)
			if got := nearDup(a, b, &na, &nb); got != want {
				t.Fatalf("dims %d, cosine %v: nearDup = %v, Cosine %v", dims, Cosine(a, b), got, want)
			}
			if want {
				dups++
			}
			if math.Abs(Cosine(a, b)-dupCosine) < 1e-9 {
				near++
			}
		}
	}
	if dups == 0 || near == 0 {
		t.Fatalf("the pairs missed the threshold: %d above it, %d within 1e-9", dups, near)
	}
}

// TestDedupEdges checks zero vectors, other lengths, missing vectors and
// the limit on a small case.
func TestDedupEdges(t *testing.T) {
	a := []float32{1, 0, 0}
	items := []memory.Item{
		{Ref: "a", Text: "I live in Porto", Embedding: a},
		{Ref: "same-text", Text: "i live, in PORTO!", Embedding: []float32{0, 1, 0}},
		{Ref: "near", Text: "other", Embedding: []float32{1, 0.1, 0}},  // cosine 0.995
		{Ref: "apart", Text: "apart", Embedding: []float32{1, 0.4, 0}}, // cosine 0.93
		{Ref: "zero", Text: "zero", Embedding: []float32{0, 0, 0}},     // never a duplicate
		{Ref: "zero-again", Text: "zero again", Embedding: []float32{0, 0, 0}},
		{Ref: "short", Text: "short", Embedding: []float32{1, 0}}, // another length
		{Ref: "none", Text: "no vector"},
		{Ref: "last", Text: "last", Embedding: []float32{0, 0, 1}},
	}
	want := []string{"a", "apart", "zero", "zero-again", "short", "none", "last"}
	if got := refs(Dedup(items, 0)); !eqStrings(got, want) {
		t.Fatalf("Dedup = %v, want %v", got, want)
	}
	if got := refs(Dedup(items, 3)); !eqStrings(got, want[:3]) {
		t.Fatalf("Dedup limit 3 = %v, want %v", got, want[:3])
	}
}

// TestNormText compares normText with strings.Join(tokenize(s), " "),
// which it replaces, on strings that mix case, scripts, punctuation and
// invalid UTF-8.
func TestNormText(t *testing.T) {
	cases := []string{"", " ", "Hello, World!", "  many   spaces  ", "İstanbul", "ÀÉÎ õü", "Straße STRASSE",
		"a\xffb", "\xff", "x\xed\xa0\x80y", "Ⅻ ⓐ Ⓐ", "ǅ ǈ", "ﬁ ligature", "ΣΑΣ σας", "日本語テキスト", "٣٤ digits ०१",
		"tab\tnew\nline", "emoji 😀 here", "\u0130\u0049", "Ⱥ Ⱦ", "under_score-dash.dot"}
	r := rand.New(rand.NewPCG(11, 12))
	alphabet := []rune("aZ09 ,.!-_İıÅåΣσßǅⅫⓐ日😀\u0300\uFFFD\t")
	for range 2000 {
		var b strings.Builder
		for range r.IntN(20) {
			if r.IntN(15) == 0 {
				b.WriteByte(byte(0x80 + r.IntN(0x80))) // a stray byte
				continue
			}
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		if got, want := normText(s), strings.Join(tokenize(s), " "); got != want {
			t.Fatalf("normText(%q) = %q, want %q", s, got, want)
		}
	}
}

// FuzzNormText checks normText against strings.Join(tokenize(s), " ").
func FuzzNormText(f *testing.F) {
	for _, s := range []string{"Hello, World!", "İstanbul a\xffb", "Ⅻ ⓐ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := normText(s), strings.Join(tokenize(s), " "); got != want {
			t.Fatalf("normText(%q) = %q, want %q", s, got, want)
		}
	})
}

// BenchmarkDedup dedups as recall does at a large budget: 250 candidates
// of about 40 words, embedded by the local embedder (384 dimensions), 125
// kept.
func BenchmarkDedup(b *testing.B) {
	words := strings.Fields(`sister viola greyhound Porto Lisbon vegan dinner recipe streaming subscription budget trip
		husband night shift rent euros car saving garden tomato bicycle commute office manager deadline doctor
		appointment knee running marathon coffee bakery weekend beach holiday flight hotel passport birthday
		party cake gift daughter school teacher homework piano lesson concert ticket museum painting novel
		library loan bank mortgage interest insurance kitchen renovation plumber neighbour dog walk park rain`)
	r := rand.New(rand.NewPCG(1, 2))
	items := make([]memory.Item, 250)
	texts := make([]string, len(items))
	for i := range texts {
		w := make([]string, 40)
		for j := range w {
			w[j] = words[r.IntN(len(words))]
		}
		texts[i] = strings.Join(w, " ")
	}
	vecs, err := NewLocal(384).Embed(b.Context(), texts, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range items {
		items[i] = memory.Item{Kind: KindMessage, Ref: fmt.Sprintf("m%d", i), Text: texts[i], Embedding: vecs[i]}
	}
	if kept := len(Dedup(items, 125)); kept != 125 {
		b.Fatalf("%d kept, want 125: the candidates are too alike to measure", kept)
	}
	b.ReportAllocs()
	start := cpuNow()
	for b.Loop() {
		Dedup(items, 125)
	}
	reportCPU(b, start)
}

// sortByScore orders items as sortCands orders their candidates.
func sortByScore(items []memory.Item) {
	cands := make([]cand, len(items))
	for i := range items {
		cands[i] = cand{it: &items[i], score: items[i].Score}
	}
	sortCands(cands)
	copy(items, materialize(cands))
}

// sortByScoreReference is sortByScore as first written, with
// sort.SliceStable.
func sortByScoreReference(items []memory.Item) {
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].Score != items[j].Score {
			return items[i].Score > items[j].Score
		}
		if !items[i].CreatedAt.Equal(items[j].CreatedAt) {
			return items[i].CreatedAt.After(items[j].CreatedAt)
		}
		return items[i].ID < items[j].ID
	})
}

// TestSortByScoreMatchesReference compares sortByScore with
// sort.SliceStable on items with tied scores, times and IDs, and NaN
// scores (which order nothing consistently: the two must still agree).
func TestSortByScoreMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 500 {
		items := make([]memory.Item, r.IntN(300))
		for i := range items {
			items[i] = memory.Item{Ref: fmt.Sprintf("r%d", i), ID: int64(r.IntN(5)),
				Score:     float64(r.IntN(4)) / 4,
				CreatedAt: t0.Add(time.Duration(r.IntN(3)) * time.Hour)}
			if trial%3 == 0 && r.IntN(10) == 0 {
				items[i].Score = math.NaN()
			}
		}
		got, want := slices.Clone(items), slices.Clone(items)
		sortByScore(got)
		sortByScoreReference(want)
		if !eqStrings(refs(got), refs(want)) {
			t.Fatalf("trial %d: sortByScore %v, reference %v", trial, refs(got), refs(want))
		}
	}
}

func BenchmarkSortByScore(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	items := make([]memory.Item, 300)
	for i := range items {
		items[i] = memory.Item{ID: int64(i), Score: r.Float64()}
	}
	for _, bm := range []struct {
		name string
		sort func([]memory.Item)
	}{{"sortByScore", sortByScore}, {"reference", sortByScoreReference}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			s := make([]memory.Item, len(items))
			for b.Loop() {
				copy(s, items)
				bm.sort(s)
			}
		})
	}
}
