// Package recall finds what a user said before: embeddings, semantic and
// full-text search across conversations, and facts about users.
package recall

import (
	"context"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/memgate/memgate/internal/lexicon"
)

// LocalModel is the model name recorded with vectors from the local
// embedder. It names the features: vectors stored under another name (the
// v1 embedder hashed no concepts) are re-embedded by reindex.
const LocalModel = "memgate-local-lexicon-v2"

// localSurfaceModel names the local embedder's vectors without concepts,
// the v1 features.
const localSurfaceModel = "memgate-local-hash-v1"

// Feature weights of the local embedder, relative to a word's own feature
// (1; its character trigrams add about as much again): its base form when
// it is inflected ("sisters" → "sister"), and each of its WordNet concepts,
// times the concept's own weight in (0, 1]. Concepts are hashed as words,
// so a concept meets the same word written out and the same concept of
// another word: "husband" and "spouse" share "spouse", "partner",
// "relative". The concept weight was chosen on `make eval` (issue 14):
// raising it from 0.5 to 2 took paraphrase coverage from 13% to 33%, with
// the other question types unchanged or better; 3 and 4 gained nothing.
const (
	baseWeight    = 0.6
	conceptWeight = 2
)

// Local is a deterministic, pure-Go embedder that needs no network: it hashes
// words, word bigrams and character trigrams into a fixed number of
// dimensions (signed feature hashing), adds the synonyms and broader
// concepts of English nouns and verbs from WordNet (internal/lexicon), each
// weighted by how specific and how likely it is, and L2-normalises the
// result.
//
// What it can match: texts sharing words or word stems ("vegetarian" /
// "vegetarians", "Lisbon"), typos and inflections through character
// trigrams, Portuguese and English alike; and English words with their
// synonyms and broader terms, so "viola" meets "instrument", "sister" meets
// "sibling", "greyhound" meets "dog" and "animal". What it cannot: concepts
// in other languages, adjectives and phrases ("vegan" does not find "no
// meat"), or which sense a word has in context (a "bass" is both a fish and
// a voice); that takes a real embedding model (provider "openai").
type Local struct {
	dims int
	lex  *lexicon.Lexicon // nil: no concept features
}

// NewLocal returns a local embedder producing dims-dimensional vectors. It
// decodes the embedded WordNet table on first use in the process.
func NewLocal(dims int) *Local {
	// The table is compiled into the binary; a decoding error is a build
	// defect the lexicon's tests catch. The embedder then falls back to
	// surface features, under their own model name, rather than failing
	// every request.
	lex, _ := lexicon.Default()
	return &Local{dims: dims, lex: lex}
}

// Model returns the model name recorded with the vectors: LocalModel, or
// the v1 name when it embeds without the lexicon.
func (l *Local) Model() string {
	if l.lex == nil {
		return localSurfaceModel
	}
	return LocalModel
}

// Dims returns the vector dimension.
func (l *Local) Dims() int { return l.dims }

// Embed returns one vector per text.
func (l *Local) Embed(_ context.Context, texts []string, _ time.Time) ([][]float32, error) {
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
		l.add(v, hash("w:", w, "", ""), 1.0)
		if prev != "" {
			l.add(v, hash("b:", prev, " ", w), 0.7)
		}
		prev = w
		padded := "^" + w + "$"
		rs := []rune(padded)
		for i := 0; i+3 <= len(rs); i++ {
			l.add(v, hash("c:", string(rs[i:i+3]), "", ""), 0.35)
		}
		l.addConcepts(v, w)
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

// addConcepts adds word's base form and WordNet concepts to v as word
// features, so a concept meets the same word written out and the same
// concept of another word: "viola" adds some "instrument", "stringed" and
// "device", and a question about an "instrument" comes nearer to it.
func (l *Local) addConcepts(v []float32, word string) {
	if l.lex == nil {
		return
	}
	base, cs := l.lex.Lookup(word)
	if base != "" && base != word {
		l.add(v, hash("w:", base, "", ""), baseWeight)
	}
	for i := range cs.Len() {
		c := cs.At(i)
		l.add(v, hash("w:", c.Word, "", ""), conceptWeight*c.Weight)
	}
}

// add adds a feature's weight to v at the dimension its hash picks, with a
// sign from the hash, so collisions cancel on average instead of piling up.
func (l *Local) add(v []float32, h uint64, weight float32) {
	idx := int(h % uint64(l.dims))
	if h>>63 == 1 {
		weight = -weight
	}
	v[idx] += weight
}

// hash is the 64-bit FNV-1a hash of a+b+c+d, without building the string.
func hash(a, b, c, d string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, s := range [4]string{a, b, c, d} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
	}
	return h
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
