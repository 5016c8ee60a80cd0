package memory

import (
	"slices"
	"testing"
)

func TestQueryTerms(t *testing.T) {
	tests := []struct {
		text string
		max  int
		want []string
	}{
		{"Where do I live? Lisbon!", 10, []string{"where", "live", "lisbon"}},
		{"the THE the", 10, []string{"the"}},                                       // only stopwords: kept
		{`"vegetarian" OR (NOT meat)*`, 10, []string{"vegetarian", "not", "meat"}}, // operators are just punctuation
		{"olá, São Paulo", 10, []string{"olá", "são", "paulo"}},
		{"one two three", 2, []string{"one", "two"}},
		{"?!", 10, nil},
	}
	for _, tt := range tests {
		if got := QueryTerms(tt.text, tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("QueryTerms(%q, %d) = %q, want %q", tt.text, tt.max, got, tt.want)
		}
	}
}

func TestQueryStopwords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"What did Caroline say about the lake?", []string{"what", "did", "say", "about", "the"}},
		{"what is it", nil}, // stopwords alone: none left out
		{"Lisbon", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := QueryStopwords(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("QueryStopwords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
