package memory

import (
	"slices"
	"testing"
)

// TestWords checks the word runs QueryTerms and recall's passage count
// read: letters, digits and marks, split at anything else (invalid UTF-8
// too), as written.
func TestWords(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"  ,. ", nil},
		{"I'm ALLERGIC to shellfish!", []string{"I", "m", "ALLERGIC", "to", "shellfish"}},
		{"ab\u0301c x1\xffy 日本語", []string{"ab\u0301c", "x1", "y", "日本語"}},
	}
	for _, tt := range tests {
		if got := slices.Collect(Words(tt.text)); !slices.Equal(got, tt.want) {
			t.Errorf("Words(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}
