package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// corpus generates the benchmark's memory items and queries from a seeded
// vocabulary of pseudo-words drawn with a Zipf law, so that texts — and
// their local embeddings — share common words and differ in rare ones, the
// way chat turns do.
type corpus struct {
	seed  uint64
	users int
	words []string
}

// vocabularySize is the number of distinct words.
const vocabularySize = 8000

// newCorpus builds the vocabulary.
func newCorpus(seed uint64, users int) *corpus {
	r := rand.New(rand.NewPCG(seed, 0))
	syllables := []string{"ka", "lo", "mi", "ren", "to", "sa", "vi", "del", "ur", "po", "ne", "gar",
		"fi", "lis", "bo", "an", "tre", "qu", "el", "mo", "dra", "sen", "pi", "cor"}
	seen := map[string]bool{}
	c := &corpus{seed: seed, users: users}
	for len(c.words) < vocabularySize {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syllables[r.IntN(len(syllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.words = append(c.words, w)
		}
	}
	return c
}

// text returns n Zipf-distributed words.
func (c *corpus) text(r *rand.Rand, n int) string {
	z := rand.NewZipf(r, 1.1, 2, uint64(len(c.words)-1))
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.words[z.Uint64()]
	}
	return strings.Join(ws, " ")
}

// item is one generated memory item, before embedding.
type item struct {
	user, conversation, source, text string
	createdAt                        time.Time
}

// epoch is the creation time of the first generated item.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// item returns the i-th item: its own random stream, so any worker can
// generate any item and the corpus is the same however it is split.
func (c *corpus) item(i int) item {
	r := rand.New(rand.NewPCG(c.seed, uint64(i)+1))
	return item{
		user:         userID(i % c.users),
		conversation: fmt.Sprintf("c%d", r.IntN(10)),
		source:       fmt.Sprintf("m%d", i),
		text:         c.text(r, 8+r.IntN(32)),
		createdAt:    epoch.Add(time.Duration(i) * time.Second),
	}
}

// query returns the i-th query: a user and a few words.
func (c *corpus) query(i int) (user, text string) {
	r := rand.New(rand.NewPCG(c.seed^0x9e3779b97f4a7c15, uint64(i)+1))
	return userID(r.IntN(c.users)), c.text(r, 3+r.IntN(6))
}

// userID names the u-th user.
func userID(u int) string { return fmt.Sprintf("u%04d", u) }

// benchTenant is the tenant every generated item belongs to.
const benchTenant = "bench"
