package ranking_test

import (
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/ranking"
)

// TestForEachWord checks words are split at anything but letters, digits
// and combining marks, lower-cased, and stripped of Latin diacritics.
func TestForEachWord(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"Ação em São-Paulo às 10h", []string{"acao", "em", "sao", "paulo", "as", "10h"}},
		{"naïve CAFÉ über Ñandú", []string{"naive", "cafe", "uber", "nandu"}},
		{"e-mail: a.b@c.de", []string{"e", "mail", "a", "b", "c", "de"}},
		{"日本語 テキスト", []string{"日本語", "テキスト"}},
	}
	for _, tt := range tests {
		var got []string
		ranking.ForEachWord([]byte(tt.text), func(w []byte) { got = append(got, string(w)) })
		if !slices.Equal(got, tt.want) {
			t.Errorf("ForEachWord(%q) = %q, want %q", tt.text, got, tt.want)
		}
		for _, w := range tt.want {
			if f := ranking.FoldWord(w); f != w {
				t.Errorf("FoldWord(%q) = %q, want it unchanged", w, f)
			}
		}
	}
	for in, want := range map[string]string{"Porto": "porto", "porto": "porto", "São": "sao", "x1": "x1"} {
		if got := ranking.FoldTerm(in); got != want {
			t.Errorf("FoldTerm(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTopK checks the best k are kept, best first, ties lower id first.
func TestTopK(t *testing.T) {
	var top ranking.TopK
	for id, score := range []float64{0.1, 0.5, 0.3, 0.5, 0.9, 0.2} {
		top.Offer(ranking.Scored{ID: int64(id), Score: score}, 3)
	}
	want := []ranking.Scored{{ID: 4, Score: 0.9}, {ID: 1, Score: 0.5}, {ID: 3, Score: 0.5}}
	if got := top.Sorted(); !slices.Equal(got, want) {
		t.Fatalf("Sorted = %v, want %v", got, want)
	}
}
