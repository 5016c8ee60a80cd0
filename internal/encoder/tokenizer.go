package encoder

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// separator marks a word's start in the vocabulary's pieces (SentencePiece's
// "▁", U+2581).
const separator = '\u2581'

// reservedPieces are the vocabulary's first entries (unknown, <s>, </s>
// and three spares), which text never produces by matching: id 0 is
// given to a character no piece starts with.
const reservedPieces = 6

// maxInputRunes bounds the text one call tokenizes. The model reads the
// first MaxTokens pieces, which a text of ordinary words spells within its
// first few hundred characters; cutting far past them bounds the cost of a
// huge text without changing the pieces the model reads.
const maxInputRunes = 64 * MaxTokens

// Tokenizer splits text into the vocabulary's pieces the way the model's
// reference implementation (the npm package @energetic-ai/embeddings, after
// TensorFlow.js's universal-sentence-encoder) does: NFKC, spaces to "▁" with
// one "▁" before the text, then the segmentation whose pieces' scores
// (log-probabilities) add up highest, found by dynamic programming over
// every piece starting at every character; a character no piece starts
// with becomes the unknown id 0, and consecutive unknowns merge into one.
// It is safe for concurrent use.
type Tokenizer struct {
	// children maps a trie node and the next character to the child node;
	// node 0 is the root.
	children map[edge]int32
	// piece is the vocabulary id ending at each node, or -1.
	piece []int32
	// scores and lens are each id's score and length in characters.
	scores []float64
	lens   []int
}

// edge is one trie transition.
type edge struct {
	node int32
	r    rune
}

// newTokenizer builds the tokenizer of pieces and their scores. A piece
// listed twice keeps its last id and score, as the reference's trie does.
func newTokenizer(pieces []string, scores []float64) *Tokenizer {
	t := &Tokenizer{children: map[edge]int32{}, piece: []int32{-1}, scores: scores, lens: make([]int, len(pieces))}
	for id, p := range pieces {
		t.lens[id] = utf8.RuneCountInString(p)
		if id < reservedPieces {
			continue
		}
		node := int32(0)
		for _, r := range p {
			next, ok := t.children[edge{node, r}]
			if !ok {
				next = int32(len(t.piece))
				t.piece = append(t.piece, -1)
				t.children[edge{node, r}] = next
			}
			node = next
		}
		if node != 0 {
			t.piece[node] = int32(id)
		}
	}
	// The unknown id stands for one character.
	if len(t.lens) > 0 {
		t.lens[0] = 1
	}
	return t
}

// Encode returns the ids of text's pieces, in order.
func (t *Tokenizer) Encode(text string) []int {
	text = norm.NFKC.String(text)
	if text == "" {
		return nil
	}
	syms := make([]rune, 0, min(len(text), maxInputRunes)+1)
	syms = append(syms, separator)
	for _, r := range text {
		if len(syms) > maxInputRunes {
			break
		}
		if r == ' ' {
			r = separator
		}
		syms = append(syms, r)
	}
	n := len(syms)
	// best[e] is the best score of a segmentation of syms[:e] and word[e]
	// the id of its last piece. The reference visits, for each end, the
	// pieces by ascending start and takes a score at least as high (or any
	// score while the best is still exactly 0): so do we.
	best := make([]float64, n+1)
	word := make([]int32, n+1)
	// ends[e] lists the (start, id) of every piece ending at e.
	type cand struct {
		start int
		id    int32
	}
	ends := make([][]cand, n+1)
	for i := range n {
		node, found := int32(0), false
		for j := i; j < n; j++ {
			next, ok := t.children[edge{node, syms[j]}]
			if !ok {
				break
			}
			node = next
			if id := t.piece[node]; id >= 0 {
				ends[j+1] = append(ends[j+1], cand{i, id})
				found = true
			}
		}
		if !found {
			ends[i+1] = append(ends[i+1], cand{i, 0})
		}
	}
	for e := 1; e <= n; e++ {
		// Pieces ending at e were appended by ascending start.
		for _, c := range ends[e] {
			score := t.score(c.id) + best[c.start]
			if best[e] == 0 || score >= best[e] {
				best[e] = score
				word[e] = c.id
			}
		}
	}
	var rev []int
	for e := n; e > 0; e -= t.lens[word[e]] {
		rev = append(rev, int(word[e]))
	}
	out := make([]int, 0, len(rev))
	prevUnknown := false
	for _, id := range rev {
		if !(prevUnknown && id == 0) {
			out = append(out, id)
		}
		prevUnknown = id == 0
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// score returns id's score; the unknown id scores 0.
func (t *Tokenizer) score(id int32) float64 {
	if id == 0 {
		return 0
	}
	return t.scores[id]
}
