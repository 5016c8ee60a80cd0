package encoder

import (
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"
	"unicode/utf8"
)

// golden is one reference vector (testdata/golden.json.gz, from
// gen/golden.js).
type golden struct {
	Text   string    `json:"text"`
	IDs    []int     `json:"ids"`
	Vector []float32 `json:"vector"`
}

func mustGolden(tb testing.TB) []golden {
	tb.Helper()
	f, err := os.Open("testdata/golden.json.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var gs []golden
	if err := json.NewDecoder(zr).Decode(&gs); err != nil {
		tb.Fatal(err)
	}
	return gs
}

func mustDefault(tb testing.TB) *Model {
	tb.Helper()
	m, err := Default()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// TestGoldenSet checks the reference set covers what the issue asks: at
// least 50 sentences, among them empty, long (past MaxTokens pieces),
// non-ASCII and all-caps ones.
func TestGoldenSet(t *testing.T) {
	gs := mustGolden(t)
	var empty, long, nonASCII, caps int
	for _, g := range gs {
		switch {
		case g.Text == "":
			empty++
		case len(g.IDs) > MaxTokens:
			long++
		}
		if len(g.Text) != utf8.RuneCountInString(g.Text) {
			nonASCII++
		}
		if len(g.Text) > 3 && g.Text == upperASCII(g.Text) {
			caps++
		}
	}
	if len(gs) < 50 || empty == 0 || long == 0 || nonASCII < 5 || caps < 2 {
		t.Fatalf("golden set: %d sentences, %d empty, %d long, %d non-ASCII, %d all-caps", len(gs), empty, long, nonASCII, caps)
	}
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestTokenizerMatchesReference holds the tokenizer to the reference's
// piece ids, sentence by sentence.
func TestTokenizerMatchesReference(t *testing.T) {
	m := mustDefault(t)
	for _, g := range mustGolden(t) {
		got := m.Tokenizer().Encode(g.Text)
		if !slices.Equal(got, g.IDs) && !(len(got) == 0 && len(g.IDs) == 0) {
			t.Errorf("Encode(%.60q) = %v, want %v", g.Text, got, g.IDs)
		}
	}
}

// TestEmbedMatchesReference holds every vector to the reference's: cosine
// at least 0.999 (the weights are int8; the reference computes in float32).
func TestEmbedMatchesReference(t *testing.T) {
	m := mustDefault(t)
	gs := mustGolden(t)
	texts := make([]string, len(gs))
	for i, g := range gs {
		texts[i] = g.Text
	}
	check := func(name string, vecs [][]float32) {
		worst := 1.0
		for i, g := range gs {
			if len(vecs[i]) != Dims {
				t.Fatalf("%s: vector %d has %d dims", name, i, len(vecs[i]))
			}
			c := cosine(vecs[i], g.Vector)
			worst = min(worst, c)
			if c < 0.999 {
				t.Errorf("%s: cosine %.5f for %.60q", name, c, g.Text)
			}
		}
		t.Logf("%s: worst cosine %.6f over %d sentences", name, worst, len(gs))
	}
	// One at a time, and all in one batch: batching must not change them.
	one := make([][]float32, len(texts))
	for i, s := range texts {
		one[i] = m.Embed([]string{s})[0]
	}
	check("one by one", one)
	check("batched", m.Embed(texts))
}
