package lexicon

import "strings"

// suffixes are WordNet's detachment rules for regular noun and verb
// inflections: an ending and what replaces it.
var suffixes = [...][2]string{
	{"ies", "y"}, {"ses", "s"}, {"xes", "x"}, {"zes", "z"}, {"ches", "ch"}, {"shes", "sh"},
	{"men", "man"}, {"es", "e"}, {"es", ""}, {"s", ""},
	{"ied", "y"}, {"ed", "e"}, {"ed", ""}, {"ing", "e"}, {"ing", ""},
}

// byBaseForm returns the entry of the first candidate base form of an
// inflected word the table holds, and whether there is one: the suffix rules in order, and
// for "-ed"/"-ing" after a doubled final consonant ("stopped", "running")
// the stem with one. Candidates are built in a stack buffer: most words
// looked up are names and other words the table lacks, and this runs for
// every word the embedder sees.
func (lx *Lexicon) byBaseForm(word string) (entry, bool) {
	var buf [64]byte
	if len(word) > len(buf) {
		return entry{}, false
	}
	for _, s := range suffixes {
		stem, ok := strings.CutSuffix(word, s[0])
		if !ok || len(stem) < 2 {
			continue
		}
		if e, ok := lx.words[string(append(append(buf[:0], stem...), s[1]...))]; ok {
			return e, true
		}
		if s[1] == "" && (s[0] == "ed" || s[0] == "ing") {
			if n := len(stem); n >= 3 && stem[n-1] == stem[n-2] && !strings.ContainsRune("aeiou", rune(stem[n-1])) {
				if e, ok := lx.words[stem[:n-1]]; ok {
					return e, true
				}
			}
		}
	}
	return entry{}, false
}
