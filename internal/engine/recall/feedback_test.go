package recall

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func TestFeedbackQuery(t *testing.T) {
	unit := func(v []float32) []float64 {
		n := 0.0
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x) / math.Sqrt(n)
		}
		return out
	}
	candsOf := func(vs ...[]float32) []cand {
		out := make([]cand, len(vs))
		for i, v := range vs {
			out[i] = cand{it: &memory.Item{Embedding: v}, score: 1 / float64(i+1)}
		}
		return out
	}
	q := []float32{3, 4, 0}
	t.Run("query plus the mean of the best candidates' unit vectors", func(t *testing.T) {
		a, b := []float32{0, 2, 0}, []float32{0, 0, 5}
		got := feedbackQuery(q, candsOf(a, nil, []float32{1, 1}, b))
		uq, ua, ub := unit(q), unit(a), unit(b)
		for i := range q {
			want := uq[i] + (ua[i]+ub[i])/2
			if math.Abs(float64(got[i])-want) > 1e-6 {
				t.Fatalf("feedback query = %v, want dimension %d %v", got, i, want)
			}
		}
	})
	t.Run("only the best feedbackDocs candidates count", func(t *testing.T) {
		vs := make([][]float32, feedbackDocs+1)
		for i := range feedbackDocs {
			vs[i] = []float32{0, 1, 0}
		}
		vs[feedbackDocs] = []float32{0, 0, 1} // past the best: left out
		got := feedbackQuery(q, candsOf(vs...))
		if got[2] != 0 {
			t.Fatalf("feedback query = %v: a candidate past the best %d counted", got, feedbackDocs)
		}
	})
	t.Run("nothing to feed back", func(t *testing.T) {
		for name, tc := range map[string]struct {
			q     []float32
			cands []cand
		}{
			"zero query":          {[]float32{0, 0, 0}, candsOf([]float32{1, 0, 0})},
			"no query":            {nil, candsOf([]float32{1, 0, 0})},
			"no candidate vector": {q, candsOf(nil, []float32{1, 2})},
			"no candidates":       {q, nil},
		} {
			if got := feedbackQuery(tc.q, tc.cands); got != nil {
				t.Errorf("%s: feedback query %v, want none", name, got)
			}
		}
	})
}

// textEmbedder embeds each text it knows as its vector, any other as
// zeros.
type textEmbedder map[string][]float32

func (e textEmbedder) Embed(_ context.Context, texts []string, _ time.Time) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if v, ok := e[t]; ok {
			out[i] = v
		} else {
			out[i] = make([]float32, 3)
		}
	}
	return out, nil
}
func (textEmbedder) Model() string { return "fixed" }
func (textEmbedder) Dims() int     { return 3 }

// addTurns stores texts as user u's turns of conversation c, refs "a",
// "b", … in order, each with its vector in emb.
func addTurns(t *testing.T, st interface {
	AddItems(context.Context, []memory.Item) error
}, emb textEmbedder, texts ...string) {
	t.Helper()
	var items []memory.Item
	for i, text := range texts {
		items = append(items, memory.Item{Tenant: "t", User: "u", Conversation: "c", Kind: KindMessage,
			Ref: string(rune('a' + i)), Text: text, Embedding: emb[text], Model: emb.Model(), Dims: emb.Dims()})
	}
	if err := st.AddItems(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

// TestSearchFindsWhatTheBestHitsAreAbout: a turn that shares no word with
// the question and is no nearer to it than MinSimilarity is still found
// when it is near the question's best hit (the second, feedback ranking),
// and ranks below that hit; a turn near neither is not found.
func TestSearchFindsWhatTheBestHitsAreAbout(t *testing.T) {
	st := newFakeStore()
	emb := textEmbedder{
		"What instruments does she play?": {1, 0, 0},
		"instruments she play":            {1, 0, 0},
		"Which instruments do you play?":  {0.8, 0.6, 0},
		"The clarinet, since I was ten.":  {0.05, 1, 0},
		"We went to the beach on Sunday.": {0, 0, 1},
	}
	addTurns(t, st, emb, "Which instruments do you play?", "The clarinet, since I was ten.", "We went to the beach on Sunday.")
	s := NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: 0.2})
	got, err := s.Search(context.Background(), SearchQuery{Tenant: "t", User: "u", Text: "What instruments does she play?"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b"}; !slices.Equal(refs(got), want) {
		t.Fatalf("found %v, want %v (the question's hit, then the turn near it)", refs(got), want)
	}
}

func TestFuseWeighted(t *testing.T) {
	it := func(ref string) memory.Item { return memory.Item{Kind: KindMessage, Ref: ref} }
	lists := [][]memory.Item{{it("x"), it("z")}, {it("y")}, {it("y"), it("x")}}
	got := materialize(newSearchScratch().fuseWeighted([]float64{1, 1, 0.5}, lists...))
	// y: 1/61 + 0.5/61; x: 1/61 + 0.5/62; z: 1/62; over 2.5/61.
	want := map[string]float64{"y": 1.5 / 2.5, "x": (1 + 0.5*61.0/62) / 2.5, "z": 61.0 / 62 / 2.5}
	if order := refs(got); !slices.Equal(order, []string{"y", "x", "z"}) {
		t.Fatalf("order %v, want [y x z]", order)
	}
	for _, g := range got {
		if math.Abs(g.Score-want[g.Ref]) > 1e-12 {
			t.Errorf("%s scores %v, want %v", g.Ref, g.Score, want[g.Ref])
		}
	}
	// A ranking of half weight decides nothing against a full one: the
	// top of a full ranking beats the top of a half one.
	got = materialize(newSearchScratch().fuseWeighted([]float64{1, 1, 0.5}, []memory.Item{it("a")}, nil, []memory.Item{it("b")}))
	if order := refs(got); !slices.Equal(order, []string{"a", "b"}) {
		t.Fatalf("order %v, want [a b]", order)
	}
}

// feedbackFailStore fails every vector search after the first: the
// feedback ranking's search, as a store that errs or a deadline that
// passes between the two would.
type feedbackFailStore struct {
	*fakeStore
	vectorCalls int
}

func (s *feedbackFailStore) SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	s.vectorCalls++
	if s.vectorCalls > 1 {
		return nil, errors.New("store went away")
	}
	return s.fakeStore.SearchVector(ctx, q)
}

// TestSearchWithoutFeedbackWhenItsSearchFails: the feedback ranking only
// adds to the first two; when its search fails the recall returns what
// they found instead of failing.
func TestSearchWithoutFeedbackWhenItsSearchFails(t *testing.T) {
	emb := textEmbedder{
		"What instruments does she play?": {1, 0, 0},
		"instruments she play":            {1, 0, 0},
		"Which instruments do you play?":  {0.8, 0.6, 0},
		"The clarinet, since I was ten.":  {0.05, 1, 0},
	}
	st := &feedbackFailStore{fakeStore: newFakeStore()}
	addTurns(t, st, emb, "Which instruments do you play?", "The clarinet, since I was ten.")
	s := NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: 0.2})
	got, err := s.Search(context.Background(), SearchQuery{Tenant: "t", User: "u", Text: "What instruments does she play?"})
	if err != nil {
		t.Fatalf("search failed with its feedback ranking's search: %v", err)
	}
	if st.vectorCalls != 2 {
		t.Fatalf("%d vector searches, want 2 (the feedback ranking's failed)", st.vectorCalls)
	}
	if want := []string{"a"}; !slices.Equal(refs(got), want) {
		t.Fatalf("found %v, want %v (the first two rankings' hit alone)", refs(got), want)
	}
}
