package ranking

import (
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestTextRanker checks the BM25 order over candidates: rarer shared words
// beat common ones, more occurrences beat fewer, a longer text with the same
// hits ranks lower, diacritics and case are folded, and ties go to the lower
// id; a related term scores less than a query word by its weight, and
// counts once, as the query word, when it is one.
func TestTextRanker(t *testing.T) {
	tests := []struct {
		name    string
		terms   []string
		related []memory.RelatedTerm
		corpus  int
		texts   map[int64]string
		want    []int64
	}{
		{"rare word beats common word", []string{"porto", "moved"}, nil, 0,
			map[int64]string{1: "I moved house", 2: "I moved to Porto", 3: "we moved the sofa", 4: "moved on"},
			[]int64{2, 4, 1, 3}}, // then shortest first
		{"more occurrences rank higher", []string{"budget"}, nil, 0,
			map[int64]string{1: "budget", 2: "budget budget", 3: "no match here", 4: "nothing"},
			[]int64{2, 1, 3, 4}},
		{"shorter text ranks higher", []string{"lisbon"}, nil, 0,
			map[int64]string{1: "we spent a long weekend walking around Lisbon with friends", 2: "Lisbon trip", 3: "x", 4: "y"},
			[]int64{2, 1, 3, 4}},
		{"diacritics and case folded", []string{"sao", "paulo"}, nil, 0,
			map[int64]string{1: "São Paulo é grande", 2: "nada", 3: "outra", 4: "mais"},
			[]int64{1, 2, 3, 4}},
		{"ties by id", []string{"x"}, nil, 0,
			map[int64]string{7: "x y", 3: "x y", 5: "x y"},
			[]int64{3, 5, 7}},
		// Every candidate holds the term: within a larger corpus it still
		// discriminates, the shorter text first (alone, its idf is floored).
		{"term in every candidate of a larger corpus", []string{"rent"}, nil, 1000,
			map[int64]string{1: "rent was late again this month sadly", 2: "rent went up", 3: "the rent"},
			[]int64{3, 2, 1}},
		{"related word weighs less", []string{"violin"}, []memory.RelatedTerm{{Term: "viola", Weight: 0.5}}, 0,
			map[int64]string{1: "viola lessons", 2: "violin lessons", 3: "x", 4: "y"},
			[]int64{2, 1, 3, 4}},
		{"heavier related word first", []string{"instrument"},
			[]memory.RelatedTerm{{Term: "oboe", Weight: 0.2}, {Term: "viola", Weight: 0.4}, {Term: "oboe", Weight: 0.3}}, 0,
			map[int64]string{1: "oboe lessons", 2: "viola lessons", 3: "x", 4: "y"},
			[]int64{2, 1, 3, 4}},
		{"related word that is a query word", []string{"viola", "violin"},
			[]memory.RelatedTerm{{Term: "violin", Weight: 0.1}}, 0,
			map[int64]string{1: "viola lessons", 2: "violin lessons", 3: "x", 4: "y"},
			[]int64{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewTextRanker(tt.terms, tt.related, tt.corpus)
			ids := make([]int64, 0, len(tt.texts))
			for id := range tt.texts {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				r.Add(id, []byte(tt.texts[id]))
			}
			var got []int64
			for _, s := range r.Best(10) {
				got = append(got, s.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("order = %v, want %v", got, tt.want)
			}
		})
	}
}

// BenchmarkTextRanker measures ranking one window of 300 candidates of
// about 150 characters.
func BenchmarkTextRanker(b *testing.B) {
	text := []byte("Note 42: last month I spent about 57 euros on streaming subscriptions, and I would like to spend less on them next month.")
	for b.Loop() {
		r := NewTextRanker([]string{"should", "cancel", "streaming", "subscriptions"}, nil, 3000)
		for id := range int64(300) {
			r.Add(id, text)
		}
		r.Best(20)
	}
}
