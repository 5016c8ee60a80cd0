// Package lexicon gives English words their general concepts, from WordNet:
// "viola" → instrument, stringed, musical; "sister" → sibling, relative;
// "greyhound" → hound, dog, canine, mammal, animal; "drive" → operate,
// vehicle. It lets a text that says "viola" meet a question that asks about
// an "instrument" without a learned embedding model.
//
// The table (wordnet.txt.gz, built by ./gen from WordNet 3.1; licence in
// WORDNET-LICENSE) covers single-word English nouns and verbs. For each
// word it holds the words of its likely senses' synonyms and hypernyms and
// the nouns of their definitions, each with a weight in (0, 1]: highest
// for the middle of the hierarchy, the categories people ask with
// ("instrument", "dog", "spouse", "subject"), lower for rare synonyms and
// abstract concepts, and none for the most abstract (entity, object,
// abstraction, ...). Senses are weighted by how often WordNet's tagged
// corpus uses them, and a name ("Viola" the genus) counts only for a word
// with no common sense, so rare senses add little; but the table knows no
// context, and a word like "bass" brings both fish and music.
//
// Table format (gzip, text, one record per line): the header line Header;
// the number of concept words and then one per line (its index is its
// id); the number of words and then one line per word, "word id:w id:w
// ...", w being the weight times 255; the number of inflection exceptions
// and then one "inflected base" line each.
package lexicon

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"slices"
	"sync"
)

// Header is the first line of the table, naming its format.
const Header = "memgate-lexicon 1"

//go:generate go run ./gen -dict /tmp/wn/package/dict -exc /tmp/wnb/usr/share/wordnet -out wordnet.txt.gz

//go:embed wordnet.txt.gz
var table []byte

// Concept is one concept word of a word, with its weight in (0, 1].
type Concept struct {
	Word   string
	Weight float32
}

// Concepts are a word's concept words, best first. The zero value is empty.
type Concepts struct {
	vocab  []string
	packed []uint32 // concept id<<8 | weight*255
}

// Len returns the number of concepts.
func (c Concepts) Len() int { return len(c.packed) }

// At returns the i-th concept, 0 <= i < Len().
func (c Concepts) At(i int) Concept {
	p := c.packed[i]
	return Concept{Word: c.vocab[p>>8], Weight: float32(p&0xff) / 255}
}

// Lexicon maps words to their concepts. It is immutable and safe for
// concurrent use.
type Lexicon struct {
	vocab      []string
	words      map[string]entry
	exceptions map[string]string
	// narrower is the table read backwards, built on first use.
	narrower func() *narrowerIndex
}

// entry is one word of the table: its base form (the key) and its
// concepts, a window on one array shared by all words.
type entry struct {
	base     string
	concepts []uint32
}

// defaultLexicon decodes the embedded table once, on first use: the table is
// read-only data compiled into the binary, so one decoded copy serves the
// whole process.
var defaultLexicon = sync.OnceValues(func() (*Lexicon, error) { return Parse(table) })

// Default returns the lexicon built from the embedded WordNet table,
// decoding it on the first call (about 0.1 s of CPU; 15 MB of heap kept).
func Default() (*Lexicon, error) { return defaultLexicon() }

// tableReader walks the lines of a decompressed table.
type tableReader struct {
	data []byte
	line int
}

// next returns the next line, without its newline.
func (r *tableReader) next() ([]byte, error) {
	r.line++
	if len(r.data) == 0 {
		return nil, fmt.Errorf("lexicon: line %d: unexpected end", r.line)
	}
	i := bytes.IndexByte(r.data, '\n')
	if i < 0 {
		i = len(r.data)
	}
	l := r.data[:i]
	r.data = r.data[min(i+1, len(r.data)):]
	return l, nil
}

// count reads a line holding one count.
func (r *tableReader) count() (int, error) {
	l, err := r.next()
	if err != nil {
		return 0, err
	}
	n, ok := atoi(l)
	if !ok {
		return 0, fmt.Errorf("lexicon: line %d: bad count %q", r.line, l)
	}
	return n, nil
}

// atoi parses a non-negative decimal number.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Parse decodes a gzip-compressed table in the format described in the
// package documentation.
func Parse(gz []byte) (*Lexicon, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(4 * len(gz)) // the text compresses about 3:1
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	r := &tableReader{data: buf.Bytes()}
	h, err := r.next()
	if err != nil {
		return nil, err
	}
	if string(h) != Header {
		return nil, fmt.Errorf("lexicon: header %q, want %q", h, Header)
	}
	nv, err := r.count()
	if err != nil {
		return nil, err
	}
	lx := &Lexicon{vocab: make([]string, nv)}
	for i := range lx.vocab {
		l, err := r.next()
		if err != nil {
			return nil, err
		}
		lx.vocab[i] = string(l)
	}
	nw, err := r.count()
	if err != nil {
		return nil, err
	}
	lx.words = make(map[string]entry, nw)
	packed := make([]uint32, 0, 16*nw)
	type span struct {
		word     string
		from, to int
	}
	spans := make([]span, 0, nw)
	for range nw {
		l, err := r.next()
		if err != nil {
			return nil, err
		}
		word, rest, _ := bytes.Cut(l, []byte{' '})
		if len(word) == 0 || len(rest) == 0 {
			return nil, fmt.Errorf("lexicon: line %d: word without concepts", r.line)
		}
		from := len(packed)
		for len(rest) > 0 {
			var e []byte
			e, rest, _ = bytes.Cut(rest, []byte{' '})
			id, w, ok := bytes.Cut(e, []byte{':'})
			n, ok1 := atoi(id)
			q, ok2 := atoi(w)
			if !ok || !ok1 || !ok2 || n >= nv || q == 0 || q > 255 {
				return nil, fmt.Errorf("lexicon: line %d: bad concept %q", r.line, e)
			}
			packed = append(packed, uint32(n)<<8|uint32(q))
		}
		spans = append(spans, span{string(word), from, len(packed)})
	}
	// Windows on the final array: appending may have moved it.
	packed = slices.Clip(packed)
	for _, s := range spans {
		lx.words[s.word] = entry{base: s.word, concepts: packed[s.from:s.to:s.to]}
	}
	ne, err := r.count()
	if err != nil {
		return nil, err
	}
	lx.exceptions = make(map[string]string, ne)
	for range ne {
		l, err := r.next()
		if err != nil {
			return nil, err
		}
		infl, base, ok := bytes.Cut(l, []byte{' '})
		if !ok {
			return nil, fmt.Errorf("lexicon: line %d: bad exception %q", r.line, l)
		}
		lx.exceptions[string(infl)] = string(base)
	}
	lx.narrower = sync.OnceValue(func() *narrowerIndex { return buildNarrower(lx) })
	return lx, nil
}

// Len returns how many words the lexicon knows.
func (lx *Lexicon) Len() int { return len(lx.words) }

// Lookup returns the base form of word (lower case) and its concept words,
// best first, or "" and no concepts when the lexicon does not know it. An
// inflected form is looked up by its base form ("sisters" → "sister",
// "practising" → "practise", "mice" → "mouse"). Function words ("the",
// "have", "who") are not looked up.
func (lx *Lexicon) Lookup(word string) (string, Concepts) {
	if len(word) < 3 || FunctionWord(word) {
		return "", Concepts{}
	}
	if e, ok := lx.words[word]; ok {
		return e.base, lx.concepts(e)
	}
	if base, ok := lx.exceptions[word]; ok {
		if e, ok := lx.words[base]; ok {
			return e.base, lx.concepts(e)
		}
	}
	if e, ok := lx.byBaseForm(word); ok {
		return e.base, lx.concepts(e)
	}
	return "", Concepts{}
}

func (lx *Lexicon) concepts(e entry) Concepts {
	return Concepts{vocab: lx.vocab, packed: e.concepts}
}
