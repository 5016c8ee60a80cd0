package baseline

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode"
)

// BM25 ranks single turns against a query with Okapi BM25 (k1 1.2, b 0.75):
// term frequency saturated by k1, inverse document frequency (so a name in
// every other turn weighs little), length normalised by b. No stop-word
// list and no stemming: the plain ranking, the floor a memory's lexical
// search should clear.
type BM25 struct {
	docs  []map[string]int
	lens  []int
	df    map[string]int
	avgdl float64
}

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// NewBM25 indexes texts, one document each.
func NewBM25(texts []string) *BM25 {
	x := &BM25{df: map[string]int{}}
	total := 0
	for _, t := range texts {
		tf := map[string]int{}
		ws := Words(t)
		for _, w := range ws {
			tf[w]++
		}
		for w := range tf {
			x.df[w]++
		}
		x.docs = append(x.docs, tf)
		x.lens = append(x.lens, len(ws))
		total += len(ws)
	}
	if len(texts) > 0 {
		x.avgdl = float64(total) / float64(len(texts))
	}
	return x
}

// Rank returns the indices of the documents sharing a word with query,
// best first (ties: the newer document, the higher index, first).
func (x *BM25) Rank(query string) []int {
	n := float64(len(x.docs))
	terms := map[string]bool{}
	for _, w := range Words(query) {
		terms[w] = true
	}
	score := make([]float64, len(x.docs))
	var hits []int
	for i, tf := range x.docs {
		for w := range terms {
			f := float64(tf[w])
			if f == 0 {
				continue
			}
			df := float64(x.df[w])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score[i] += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(x.lens[i])/x.avgdl))
		}
		if score[i] > 0 {
			hits = append(hits, i)
		}
	}
	slices.SortStableFunc(hits, func(a, b int) int {
		switch {
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return b - a
	})
	return hits
}

// Words splits text into lower-case words of letters and digits.
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// TextCounter counts a text's tokens; *tokens.Counter implements it.
type TextCounter interface {
	Counter
	Text(model, s string) int
}

// Pack returns system, then one system message listing passages in the
// order of ranked (indices into passages) for as long as the whole prompt
// stays within budget, then question. The listed passages are shown oldest
// first (ascending index). It never exceeds the budget unless system and
// question alone do.
func Pack(c TextCounter, model string, system []json.RawMessage, question json.RawMessage, passages []string, ranked []int, budget int, heading string) []json.RawMessage {
	build := func(chosen []int) []json.RawMessage {
		out := append([]json.RawMessage{}, system...)
		if len(chosen) > 0 {
			sorted := slices.Clone(chosen)
			slices.Sort(sorted)
			var b strings.Builder
			b.WriteString(heading)
			for _, i := range sorted {
				b.WriteString("\n")
				b.WriteString(passages[i])
			}
			raw, _ := json.Marshal(map[string]string{"role": "system", "content": b.String()}) // strings: cannot fail
			out = append(out, raw)
		}
		return append(out, question)
	}
	used := c.Messages(model, build(nil)) + c.Text(model, heading) + 8 // the memory message's own overhead
	var chosen []int
	for _, i := range ranked {
		cost := c.Text(model, "\n"+passages[i])
		if used+cost > budget {
			continue // a shorter passage further down may still fit
		}
		used += cost
		chosen = append(chosen, i)
	}
	// The sum of the parts approximates the whole; trim to the exact count.
	out := build(chosen)
	for len(chosen) > 0 && c.Messages(model, out) > budget {
		chosen = chosen[:len(chosen)-1]
		out = build(chosen)
	}
	return out
}
