// Package recall finds what a user said before: embeddings, semantic and
// full-text search across conversations, and facts about users.
package recall

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// LocalModel is the model name recorded with vectors from the local embedder.
const LocalModel = "memgate-local-hash-v1"

// Local is a deterministic, pure-Go embedder that needs no network: it hashes
// words, word bigrams and character trigrams into a fixed number of
// dimensions (signed feature hashing) and L2-normalises the result.
//
// What it can match: texts sharing words or word stems ("vegetarian" /
// "vegetarians", "Lisbon"), typos and inflections through character
// trigrams, Portuguese and English alike. What it cannot: synonyms and
// paraphrases with no surface overlap ("dinner" does not find "restaurant",
// "car" does not find "vehicle"); that takes a real embedding model
// (provider "openai").
type Local struct {
	dims int
}

// NewLocal returns a local embedder producing dims-dimensional vectors.
func NewLocal(dims int) *Local { return &Local{dims: dims} }

// Model returns the model name recorded with the vectors.
func (l *Local) Model() string { return LocalModel }

// Dims returns the vector dimension.
func (l *Local) Dims() int { return l.dims }

// Embed returns one vector per text.
func (l *Local) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = l.vector(t)
	}
	return out, nil
}

// stopwords carry no topic; they are left out of word features.
var stopwords = map[string]bool{
	"the": true, "a": true, "an": true, "and": true, "or": true, "to": true, "of": true, "in": true, "on": true,
	"is": true, "are": true, "was": true, "i": true, "you": true, "it": true, "for": true, "my": true, "me": true,
	"what": true, "do": true, "can": true, "with": true, "at": true, "be": true, "this": true, "that": true,
	"o": true, "e": true, "de": true, "da": true, "em": true, "um": true, "uma": true, "que": true,
	"eu": true, "meu": true, "minha": true, "para": true, "com": true, "no": true, "na": true, "os": true, "as": true,
}

func (l *Local) vector(text string) []float32 {
	v := make([]float32, l.dims)
	words := tokenize(text)
	prev := ""
	for _, w := range words {
		if stopwords[w] {
			prev = ""
			continue
		}
		l.add(v, "w:"+w, 1.0)
		if prev != "" {
			l.add(v, "b:"+prev+" "+w, 0.7)
		}
		prev = w
		padded := "^" + w + "$"
		rs := []rune(padded)
		for i := 0; i+3 <= len(rs); i++ {
			l.add(v, "c:"+string(rs[i:i+3]), 0.35)
		}
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// add hashes feature into v with a sign from the hash, so collisions cancel
// on average instead of piling up.
func (l *Local) add(v []float32, feature string, weight float32) {
	h := fnv.New64a()
	h.Write([]byte(feature))
	s := h.Sum64()
	idx := int(s % uint64(l.dims))
	if s>>63 == 1 {
		weight = -weight
	}
	v[idx] += weight
}

// tokenize lower-cases text and splits it into words of letters and digits.
func tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Cosine returns the cosine similarity of two vectors of equal length (the
// dot product when both are normalised, as the embedders' vectors are).
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
