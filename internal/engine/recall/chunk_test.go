package recall

import (
	"strings"
	"testing"
)

func TestChunk(t *testing.T) {
	sentence := "I want to save R$ 5.000 by June and the rent is 1.200 euros a month. "
	long := strings.Repeat(sentence, 60) // ~1,000 tokens
	tests := []struct {
		name      string
		text      string
		minChunks int
		maxChunks int
	}{
		{"empty", "   ", 0, 0},
		{"short", "I live in Lisbon.", 1, 1},
		{"long", long, 3, 5},
		{"one giant sentence", strings.Repeat("word ", 1000), 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := Chunk(tt.text)
			if len(chunks) < tt.minChunks || len(chunks) > tt.maxChunks {
				t.Fatalf("%d chunks, want %d..%d", len(chunks), tt.minChunks, tt.maxChunks)
			}
			for i, c := range chunks {
				if approxTokens(c) > chunkMax {
					t.Errorf("chunk %d has ~%d tokens, over %d", i, approxTokens(c), chunkMax)
				}
				if tt.name == "long" && !strings.HasSuffix(c, "month.") {
					t.Errorf("chunk %d does not end on a sentence boundary: ...%q", i, c[max(0, len(c)-20):])
				}
			}
			if got, want := strings.Fields(strings.Join(chunks, " ")), strings.Fields(tt.text); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatal("chunks lose or reorder text")
			}
		})
	}
}

func TestSplitSentencesKeepsNumbers(t *testing.T) {
	got := splitSentences("I want R$ 5.000 by June. Rent is 3.5k!\nOk? yes")
	want := []string{"I want R$ 5.000 by June.", "Rent is 3.5k!", "Ok?", "yes"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}
