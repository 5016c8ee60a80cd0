// Package lexicon gives English words their general concepts, from WordNet:
// "viola" → stringed, instrument, musical; "sister" → sibling, relative;
// "greyhound" → hound, dog, canine, mammal, animal. It lets a text that
// says "viola" meet a question that asks about an "instrument" without a
// learned embedding model.
//
// The table (wordnet.txt.gz, built by ./gen from WordNet 3.1; licence in
// WORDNET-LICENSE) covers single-word English nouns and verbs. For each
// word it holds the words of its likely senses' synonyms and hypernyms, each
// with a weight in (0, 1] that is larger the more specific the concept
// (a synonym near 1, "animal" about 0.3); the most abstract concepts
// (entity, object, abstraction, act, ...) are left out. Senses are
// weighted by how often WordNet's tagged corpus uses them, so rare senses
// add little: the table knows no context, and a word like "bass" brings
// both fish and music.
//
// Table format (gzip, text, one record per line): the header line Header;
// the number of concept words and then one per line (its index is its
// id); the number of words and then one line per word, "word id:w id:w
// ...", w being the weight times 255; the number of inflection exceptions
// and then one "inflected base" line each.
package lexicon

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
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

// Lexicon maps words to their concepts. It is immutable and safe for
// concurrent use.
type Lexicon struct {
	words      map[string]*entry
	exceptions map[string]string
}

// entry is one word of the table.
type entry struct {
	base     string
	concepts []Concept
}

// defaultLexicon decodes the embedded table once, on first use: the table is
// read-only data compiled into the binary, so one decoded copy serves the
// whole process.
var defaultLexicon = sync.OnceValues(func() (*Lexicon, error) { return Parse(table) })

// Default returns the lexicon built from the embedded WordNet table,
// decoding it on the first call (tens of milliseconds, some megabytes).
func Default() (*Lexicon, error) { return defaultLexicon() }

// Parse decodes a gzip-compressed table in the format described in the
// package documentation.
func Parse(gz []byte) (*Lexicon, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	next := func() (string, error) {
		line++
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return "", fmt.Errorf("lexicon: line %d: %w", line, err)
			}
			return "", fmt.Errorf("lexicon: line %d: unexpected end", line)
		}
		return sc.Text(), nil
	}
	count := func() (int, error) {
		s, err := next()
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("lexicon: line %d: bad count %q", line, s)
		}
		return n, nil
	}
	h, err := next()
	if err != nil {
		return nil, err
	}
	if h != Header {
		return nil, fmt.Errorf("lexicon: header %q, want %q", h, Header)
	}
	nv, err := count()
	if err != nil {
		return nil, err
	}
	vocab := make([]string, nv)
	for i := range vocab {
		if vocab[i], err = next(); err != nil {
			return nil, err
		}
	}
	nw, err := count()
	if err != nil {
		return nil, err
	}
	lx := &Lexicon{words: make(map[string]*entry, nw)}
	for range nw {
		s, err := next()
		if err != nil {
			return nil, err
		}
		f := strings.Fields(s)
		if len(f) < 2 {
			return nil, fmt.Errorf("lexicon: line %d: word without concepts", line)
		}
		cs := make([]Concept, len(f)-1)
		for i, e := range f[1:] {
			id, w, ok := strings.Cut(e, ":")
			n, err1 := strconv.Atoi(id)
			q, err2 := strconv.Atoi(w)
			if !ok || err1 != nil || err2 != nil || n < 0 || n >= nv || q <= 0 || q > 255 {
				return nil, fmt.Errorf("lexicon: line %d: bad concept %q", line, e)
			}
			cs[i] = Concept{Word: vocab[n], Weight: float32(q) / 255}
		}
		lx.words[f[0]] = &entry{base: f[0], concepts: cs}
	}
	ne, err := count()
	if err != nil {
		return nil, err
	}
	lx.exceptions = make(map[string]string, ne)
	for range ne {
		s, err := next()
		if err != nil {
			return nil, err
		}
		infl, base, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("lexicon: line %d: bad exception %q", line, s)
		}
		lx.exceptions[infl] = base
	}
	return lx, nil
}

// Len returns how many words the lexicon knows.
func (lx *Lexicon) Len() int { return len(lx.words) }

// Lookup returns the base form of word (lower case) and its concept words,
// best first, or "" and nil when the lexicon does not know it. An
// inflected form is looked up by its base form ("sisters" → "sister",
// "practising" → "practise", "mice" → "mouse"). Function words ("the",
// "have", "who") are not looked up. The returned slice is shared: callers
// must not modify it.
func (lx *Lexicon) Lookup(word string) (string, []Concept) {
	if len(word) < 3 || FunctionWord(word) {
		return "", nil
	}
	if e, ok := lx.words[word]; ok {
		return e.base, e.concepts
	}
	if base, ok := lx.exceptions[word]; ok {
		if e, ok := lx.words[base]; ok {
			return e.base, e.concepts
		}
	}
	if e := lx.byBaseForm(word); e != nil {
		return e.base, e.concepts
	}
	return "", nil
}
