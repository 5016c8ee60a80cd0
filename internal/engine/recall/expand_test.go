package recall

import (
	"context"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/lexicon"
	"github.com/memgate/memgate/internal/memory"
)

func mustExpander(tb testing.TB) *Expander {
	tb.Helper()
	lex, err := lexicon.Default()
	if err != nil {
		tb.Fatal(err)
	}
	return NewExpander(lex)
}

func relatedWeight(rs []memory.RelatedTerm, term string) float64 {
	for _, r := range rs {
		if r.Term == term {
			return r.Weight
		}
	}
	return 0
}

// TestExpanderRelated checks which words a query's words bring: other
// inflections of their own, broader terms, narrower terms and their
// inflections; never the query's words, function words or names.
func TestExpanderRelated(t *testing.T) {
	e := mustExpander(t)
	tests := []struct {
		name  string
		terms []string
		want  []string  // among the related terms
		above [2]string // above[0] weighs more than above[1] ("" when unchecked)
	}{
		{"narrower terms of a category", []string{"musical", "instrument"},
			[]string{"trombone", "trombones", "accordion"}, [2]string{"trombone", "affidavit"}},
		{"members of a relation", []string{"sibling"}, []string{"brother", "brothers"}, [2]string{}},
		{"members of a set", []string{"weekday"}, []string{"thursday", "thursdays"}, [2]string{}},
		{"inflections and broader terms", []string{"puppies"}, []string{"puppy", "dog", "dogs"}, [2]string{"puppy", "dog"}},
		{"synonyms of an inflected verb", []string{"purchased"}, []string{"purchase", "buy", "bought"}, [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := e.Related(tt.terms)
			seen := map[string]bool{}
			for _, r := range got {
				if seen[r.Term] && r.Weight > relatedWeight(got, r.Term) {
					t.Fatalf("%q listed again with a higher weight", r.Term)
				}
				seen[r.Term] = true
				if slices.Contains(tt.terms, r.Term) || !plainWord(r.Term) || lexicon.FunctionWord(r.Term) {
					t.Errorf("related term %q", r.Term)
				}
				if r.Weight <= 0 || r.Weight > 1 {
					t.Errorf("%q weighs %v", r.Term, r.Weight)
				}
			}
			for _, w := range tt.want {
				if !seen[w] {
					t.Errorf("%q not among the %d related terms", w, len(got))
				}
			}
			if a, b := tt.above[0], tt.above[1]; a != "" && relatedWeight(got, a) <= relatedWeight(got, b) {
				t.Errorf("%q weighs %v, not above %q's %v", a, relatedWeight(got, a), b, relatedWeight(got, b))
			}
			if again := e.Related(tt.terms); !slices.Equal(again, got) {
				t.Error("a second call relates other terms or another order")
			}
		})
	}
	for _, terms := range [][]string{nil, {"the", "have"}, {"xyzzyq"}, {"ab"}} {
		if got := e.Related(terms); len(got) != 0 {
			t.Errorf("Related(%q) = %v, want nothing", terms, got)
		}
	}
	if got := (*Expander)(nil).Related([]string{"dog"}); got != nil {
		t.Errorf("nil Expander related %v", got)
	}
}

// TestSearcherExpandsQuery asks a question that shares no word with the
// passage it is about: only the related words of the full-text search
// find it (vector matches are filtered out here).
func TestSearcherExpandsQuery(t *testing.T) {
	emb := NewLocal(384)
	st := newFakeStore()
	mustIndex(t, st, emb,
		memory.Item{Tenant: "t", User: "u", Ref: "brass", Text: "I finally bought a second-hand trombone"},
		memory.Item{Tenant: "t", User: "u", Ref: "cards", Text: "we played cards all night"},
		memory.Item{Tenant: "t", User: "u", Ref: "game", Text: "did you play the new game"},
	)
	q := SearchQuery{Tenant: "t", User: "u", Text: "Which musical instrument did I buy?"}
	for _, tt := range []struct {
		name string
		exp  *Expander
		want bool
	}{{"without expansion", nil, false}, {"with expansion", mustExpander(t), true}} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSearcher(st, emb, SearchOptions{TopK: 5, MinSimilarity: 0.99, Expander: tt.exp})
			got, err := s.Search(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if found := len(got) > 0 && got[0].Ref == "brass"; found != tt.want {
				t.Fatalf("refs = %v, want the trombone first: %v", refs(got), tt.want)
			}
		})
	}
}
