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

// wordPieces is a Window's piece count for tests: perWord pieces a word.
func wordPieces(perWord int) func(string) int {
	return func(s string) int { return perWord * len(strings.Fields(s)) }
}

func TestWindowChunks(t *testing.T) {
	sentence := "The boxes are still in the hallway and the movers want another date. "
	tests := []struct {
		name    string
		w       *Window
		text    string
		whole   bool // one chunk, the text itself
		windows int  // at least this many chunks that fit the window
	}{
		{name: "no window: as Chunk", w: nil, text: strings.Repeat(sentence, 10), whole: true},
		{name: "fits the window", w: &Window{Pieces: wordPieces(1), Max: 128}, text: strings.Repeat(sentence, 5), whole: true},
		{name: "past the window", w: &Window{Pieces: wordPieces(1), Max: 128}, text: strings.Repeat(sentence, 20), windows: 2},
		{name: "line breaks kept in the runs", w: &Window{Pieces: wordPieces(1), Max: 128}, text: strings.Repeat("The boxes are still in the hallway\n\nand the movers want another date.\n", 20), windows: 2},
		{name: "denser text, smaller runs", w: &Window{Pieces: wordPieces(2), Max: 128}, text: strings.Repeat(sentence, 20), windows: 4},
		{name: "one long sentence cut at words", w: &Window{Pieces: wordPieces(1), Max: 32}, text: strings.Repeat("word ", 300), windows: 8},
		{name: "past the embedded runs: the rest as Chunk cuts it", w: &Window{Pieces: wordPieces(1), Max: 64}, text: strings.Repeat(sentence, 400), windows: embeddedRuns},
		{name: "empty", w: &Window{Pieces: wordPieces(1), Max: 128}, text: "  "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, embedded := tt.w.chunks(tt.text)
			text := strings.TrimSpace(tt.text)
			if tt.whole {
				if len(got) != 1 || got[0] != text {
					t.Fatalf("%d chunks, want the whole text as one", len(got))
				}
				return
			}
			if strings.Join(strings.Fields(strings.Join(got, " ")), " ") != strings.Join(strings.Fields(text), " ") {
				t.Fatal("the chunks do not hold every word of the text, in order")
			}
			if text == "" {
				if len(got) != 0 {
					t.Fatalf("%d chunks of empty text", len(got))
				}
				return
			}
			fit := 0
			for i, c := range got {
				if !strings.Contains(text, c) {
					t.Fatalf("chunk %d %.60q is not the text's own span", i, c)
				}
				if i < embedded && tt.w.Pieces(c) > tt.w.Max {
					t.Fatalf("chunk %d has %d pieces, past the window of %d", i, tt.w.Pieces(c), tt.w.Max)
				}
				if tt.w.Pieces(c) <= tt.w.Max {
					fit++
				}
			}
			if fit < tt.windows {
				t.Fatalf("%d chunks fit the window, want at least %d", fit, tt.windows)
			}
			if n := len(Chunk(text)); len(got) > embeddedRuns+n || embedded > embeddedRuns {
				t.Fatalf("%d chunks, %d embedded: more than %d runs embedded and Chunk's %d for the rest", len(got), embedded, embeddedRuns, n)
			}
		})
	}
}

func TestAround(t *testing.T) {
	s := strings.Repeat("alpha beta gamma delta ", 100)
	for _, tt := range []struct{ from, n int }{{0, 50}, {200, 60}, {1000, 80}, {len(s) - 40, 60}, {1200, 400}} {
		from := tt.from + strings.IndexByte(s[tt.from:], ' ') + 1
		to := from + 20
		to += strings.IndexByte(s[to:], ' ')
		part := s[from:to]
		got := around(s, from, to, tt.n)
		if !strings.Contains(got, part) {
			t.Fatalf("around(%d, %d, %d) = %q: the part %q is not whole", from, to, tt.n, got, part)
		}
		body := strings.TrimSuffix(strings.TrimPrefix(got, "…"), ellipsis)
		if len(body) > tt.n {
			t.Fatalf("around(%d, %d, %d) holds %d bytes", from, to, tt.n, len(body))
		}
		if !strings.Contains(s, body) {
			t.Fatalf("around(%d, %d, %d) = %q is not a cut of the text at spaces", from, to, tt.n, got)
		}
		if !strings.HasPrefix(got, "…") && !strings.HasPrefix(s, body) {
			t.Fatalf("around(%d, %d, %d) = %q starts inside the text without an ellipsis", from, to, tt.n, got)
		}
		if !strings.HasSuffix(got, ellipsis) && !strings.HasSuffix(strings.TrimSpace(s), body) {
			t.Fatalf("around(%d, %d, %d) = %q ends inside the text without an ellipsis", from, to, tt.n, got)
		}
	}
	if got := around("short text", 0, 5, 100); got != "short text" {
		t.Fatalf("around of a short text = %q, want it whole", got)
	}
}

// TestWindowChunksOfOneHugeSentence: a text with no sentence ends (a
// hostile body) gets embeddedChunks runs, then chunks of Chunk's size, not
// a window's: its count of stored items grows as Chunk's would.
func TestWindowChunksOfOneHugeSentence(t *testing.T) {
	text := strings.Repeat("word ", 50_000)
	got, embedded := (&Window{Pieces: wordPieces(1), Max: 64}).chunks(text)
	if n := len(Chunk(text)); len(got) > embeddedRuns+n || embedded > embeddedRuns {
		t.Fatalf("%d chunks, %d embedded, want at most %d runs embedded and Chunk's %d", len(got), embedded, embeddedRuns, n)
	}
	if strings.Join(strings.Fields(strings.Join(got, " ")), " ") != strings.TrimSpace(text) {
		t.Fatal("the chunks do not hold every word of the text, in order")
	}
}

// TestWindowChunksEmbedAFewKB: a message of a few KB (here 30 runs, past
// embeddedChunks) has every run embedded, so no part of it is left to
// full text alone; a longer one has embeddedRuns embedded.
func TestWindowChunksEmbedAFewKB(t *testing.T) {
	sentence := "The boxes are still in the hallway and the movers want another date. "
	w := &Window{Pieces: wordPieces(1), Max: 64}
	got, embedded := w.chunks(strings.Repeat(sentence, 30))
	if len(got) <= embeddedChunks || embedded != len(got) {
		t.Fatalf("%d runs, %d embedded: want more than %d runs, all embedded", len(got), embedded, embeddedChunks)
	}
	got, embedded = w.chunks(strings.Repeat(sentence, 400))
	if embedded != embeddedRuns || len(got) <= embedded {
		t.Fatalf("%d chunks, %d embedded: want %d embedded and the rest for full text", len(got), embedded, embeddedRuns)
	}
}
