package lexicon

import (
	"cmp"
	"slices"
	"strings"
)

// narrowerIndex is the table read backwards: for each concept word, the
// words that have it among their concepts, with the same weights. Its
// large parts hold no pointers (packed, spans), so the garbage collector
// does not walk them.
type narrowerIndex struct {
	words     []string            // the table's words, sorted: ids of packed
	ids       map[string]int32    // concept word -> index into spans
	spans     [][2]int32          // per concept: its window on packed
	packed    []uint32            // word id<<8 | weight*255, best first per concept
	irregular map[string][]string // base -> its irregular inflections, sorted
}

// buildNarrower inverts lx's table. Words are numbered in sorted order and
// each concept's words are sorted by weight, then word, so the index does
// not depend on map iteration order.
func buildNarrower(lx *Lexicon) *narrowerIndex {
	words := make([]string, 0, len(lx.words))
	for w := range lx.words {
		words = append(words, w)
	}
	slices.Sort(words)
	// A word Lookup ignores (too short, a function word) is nobody's
	// narrower word.
	listed := func(w string) bool { return len(w) >= 3 && !FunctionWord(w) }
	counts := make([]int32, len(lx.vocab))
	nconcepts := 0
	for _, w := range words {
		if !listed(w) {
			continue
		}
		for _, p := range lx.words[w].concepts {
			if counts[p>>8] == 0 {
				nconcepts++
			}
			counts[p>>8]++
		}
	}
	n := &narrowerIndex{words: words, ids: make(map[string]int32, nconcepts),
		spans: make([][2]int32, 0, nconcepts), irregular: map[string][]string{}}
	starts := make([]int32, len(lx.vocab))
	total := int32(0)
	for id, c := range counts {
		starts[id] = total
		total += c
	}
	n.packed = make([]uint32, total)
	fill := slices.Clone(starts)
	for wid, w := range words {
		if !listed(w) {
			continue
		}
		for _, p := range lx.words[w].concepts {
			c := p >> 8
			n.packed[fill[c]] = uint32(wid)<<8 | p&0xff
			fill[c]++
		}
	}
	for id, c := range counts {
		if c == 0 {
			continue
		}
		s := n.packed[starts[id] : starts[id]+c]
		slices.SortFunc(s, func(a, b uint32) int {
			if c := cmp.Compare(b&0xff, a&0xff); c != 0 {
				return c
			}
			return cmp.Compare(a>>8, b>>8)
		})
		n.ids[lx.vocab[id]] = int32(len(n.spans))
		n.spans = append(n.spans, [2]int32{starts[id], starts[id] + c})
	}
	for infl, base := range lx.exceptions {
		if !FunctionWord(infl) {
			n.irregular[base] = append(n.irregular[base], infl)
		}
	}
	for _, fs := range n.irregular {
		slices.Sort(fs)
	}
	return n
}

// Narrower returns the words that have word's base form (or word itself,
// when the table does not hold it as a word) among their concepts, best
// first, each with the weight it has there: the narrower terms, members
// and synonyms of a category ("instrument" → piano, trombone, ...;
// "sibling" → sister, brother; "weekday" → monday, ...); never a word
// Lookup ignores. Function words have none. The index is built on the
// first call (0.15–0.2 s of CPU, 5 MB).
func (lx *Lexicon) Narrower(word string) Concepts {
	if len(word) < 3 || FunctionWord(word) {
		return Concepts{}
	}
	n := lx.narrower()
	key := word
	if base, _ := lx.Lookup(word); base != "" {
		key = base
	}
	i, ok := n.ids[key]
	if !ok {
		return Concepts{}
	}
	sp := n.spans[i]
	return Concepts{vocab: n.words, packed: n.packed[sp[0]:sp[1]:sp[1]]}
}

// AppendForms appends to dst the surface forms a base form may take in
// text: itself, its regular English inflections ("-s", "-es", "-ies";
// "-ed", "-d", "-ied"; "-ing") and the irregular ones WordNet lists
// ("grow" → grew, grown; "child" → children), never a function word.
// They are guesses for a word of unknown part of speech: some may not be
// words, which only costs a lookup that finds nothing.
func (lx *Lexicon) AppendForms(dst []string, base string) []string {
	return lx.appendForms(dst, base, true)
}

// AppendNounForms appends fewer of AppendForms' forms: base, its regular
// plural ("-s", "-es", "-ies") and the irregular forms WordNet lists
// (plurals, and for verbs their irregular past: "grow" → grew, grown).
func (lx *Lexicon) AppendNounForms(dst []string, base string) []string {
	return lx.appendForms(dst, base, false)
}

func (lx *Lexicon) appendForms(dst []string, base string, verb bool) []string {
	dst = append(dst, base)
	if base == "" {
		return dst
	}
	from := len(dst)
	add := func(f string) {
		if f != base && !FunctionWord(f) && !slices.Contains(dst[from:], f) {
			dst = append(dst, f)
		}
	}
	last := base[len(base)-1]
	consonantY := last == 'y' && len(base) > 1 && !strings.ContainsRune("aeiou", rune(base[len(base)-2]))
	stem := base[:len(base)-1]
	var past string
	switch {
	case consonantY:
		add(stem + "ies")
		past = stem + "ied"
	case strings.HasSuffix(base, "s") || strings.HasSuffix(base, "x") || strings.HasSuffix(base, "z") ||
		strings.HasSuffix(base, "ch") || strings.HasSuffix(base, "sh"):
		add(base + "es")
		past = base + "ed"
	case last == 'e':
		add(base + "s")
		past = base + "d"
	default:
		add(base + "s")
		past = base + "ed"
	}
	for _, f := range lx.narrower().irregular[base] {
		add(f)
	}
	if verb {
		add(past)
		if last == 'e' && !strings.HasSuffix(base, "ee") {
			add(stem + "ing")
		} else {
			add(base + "ing")
		}
	}
	return dst
}
